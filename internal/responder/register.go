package responder

import (
	"context"
	"fmt"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"k8s.io/klog/v2"
)

// Registration is the responder instance's entry in Consul's catalog.
type Registration struct {
	// ID is the instance's service ID: the pod's name.
	ID string
	// Address and Port are where gateways reach it: the pod's IP and the port it
	// serves mTLS on.
	Address string
	Port    int
}

// checkTTL is how long the instance stays passing after the responder last said it
// was ready; checkRefresh is how often it says so. A responder that stops, or that
// loses its identity, turns critical within checkTTL, and Consul's xDS takes it out
// of the gateways' endpoints.
const (
	checkTTL     = 15 * time.Second
	checkRefresh = 5 * time.Second
)

// deregisterAfter is how long a critical instance stays in the catalog: a pod that
// is gone without deregistering (a node lost) leaves no instance behind.
const deregisterAfter = "5m"

// registration is what is written to the agent for reg.
func (s *Server) registration(reg Registration) *consulapi.AgentServiceRegistration {
	return &consulapi.AgentServiceRegistration{
		ID:        reg.ID,
		Name:      s.cfg.Service,
		Address:   reg.Address,
		Port:      reg.Port,
		Namespace: s.cfg.Namespace,
		Partition: s.cfg.Partition,
		Connect:   &consulapi.AgentServiceConnect{Native: true},
		Check: &consulapi.AgentServiceCheck{
			CheckID:                        checkID(reg),
			Name:                           "responder ready",
			TTL:                            checkTTL.String(),
			DeregisterCriticalServiceAfter: deregisterAfter,
		},
	}
}

func checkID(reg Registration) string { return "responder:" + reg.ID }

// KeepRegistered registers the instance and keeps its check passing while the
// responder is ready, until ctx is done; then it deregisters the instance.
func (s *Server) KeepRegistered(ctx context.Context, reg Registration) {
	logger := klog.FromContext(ctx).WithValues("serviceID", reg.ID)
	agent := s.cfg.Client.Agent()
	registered := false
	tick := time.NewTicker(checkRefresh)
	defer tick.Stop()
	for {
		if !registered {
			if err := agent.ServiceRegister(s.registration(reg)); err != nil {
				logger.Error(err, "Could not register in Consul's catalog; retrying")
			} else {
				registered = true
				logger.Info("Registered in Consul's catalog", "service", s.cfg.Service, "address", reg.Address, "port", reg.Port)
			}
		}
		if registered {
			if err := s.reportReady(agent, reg); err != nil {
				// The agent may have lost the registration (a restart): register again.
				logger.Error(err, "Could not update the instance's check; registering again")
				registered = false
			}
		}
		select {
		case <-ctx.Done():
			s.deregister(context.WithoutCancel(ctx), agent, reg)
			return
		case <-tick.C:
		}
	}
}

// reportReady sets the instance's check: passing once the responder has its
// identity, critical before.
func (s *Server) reportReady(agent *consulapi.Agent, reg Registration) error {
	status, output := consulapi.HealthPassing, "ready"
	if err := s.Ready(); err != nil {
		status, output = consulapi.HealthCritical, err.Error()
	}
	if err := agent.UpdateTTL(checkID(reg), output, status); err != nil {
		return fmt.Errorf("update check %s: %w", checkID(reg), err)
	}
	return nil
}

// deregister takes the instance out of the catalog, so that gateways stop sending to
// a responder that is stopping.
func (s *Server) deregister(ctx context.Context, agent *consulapi.Agent, reg Registration) {
	logger := klog.FromContext(ctx)
	if err := agent.ServiceDeregister(reg.ID); err != nil {
		logger.Error(err, "Could not deregister from Consul's catalog; its check turns critical and Consul removes it", "serviceID", reg.ID)
		return
	}
	logger.Info("Deregistered from Consul's catalog", "serviceID", reg.ID)
}
