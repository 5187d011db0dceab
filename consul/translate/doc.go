// Package translate turns confirmed Gateway API objects into the Consul config entries
// that express them (api-gateway, http-route, tcp-route, inline-certificate and the
// service-defaults it owns), and names what it cannot express as problems. It is pure:
// a Snapshot in, a Desired state out, no clients and no clock. Translator is the same
// translation with a memory, so that one changed object costs its own translation.
//
// The translation trusts the status pipeline's decision (decision.Route, package sync/decision): a rule
// the decision dropped is sent to the blackhole service, and a field the decision
// allowed is always expressed.
package translate
