package leader

import (
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	good := Config{Namespace: "ns", Name: "lease", Identity: "a", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	tests := []struct {
		name  string
		edit  func(*Config)
		valid bool
	}{
		{"kube-controller-manager timing", func(*Config) {}, true},
		{"no identity", func(c *Config) { c.Identity = "" }, false},
		{"no namespace", func(c *Config) { c.Namespace = "" }, false},
		{"renew deadline not below the lease", func(c *Config) { c.RenewDeadline = 15 * time.Second }, false},
		{"no margin for the writers to stop", func(c *Config) { c.LeaseDuration = 12 * time.Second }, false},
		{"retry period not below the renew deadline", func(c *Config) { c.RetryPeriod = 10 * time.Second }, false},
		{"zero retry period", func(c *Config) { c.RetryPeriod = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			if err := c.Validate(); (err == nil) != tt.valid {
				t.Errorf("Validate() = %v, want valid=%v", err, tt.valid)
			}
		})
	}
}
