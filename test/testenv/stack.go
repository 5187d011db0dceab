package testenv

import (
	"testing"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// BackendPort is the port of a Stack's backend Service, which its routes send to.
const BackendPort = 8080

// Stack is the set-up most tests of routes start from: a namespace and a GatewayClass,
// both named after the test's own prefix, of a controller name of its own
// (StackController), and, with NewGatewayStack, a backend Service and a Gateway with
// one HTTP listener. Its methods build more objects of its namespace and class; a
// test creates them with Env.Create.
type Stack struct {
	Namespace  string
	Class      string
	Controller gatewayv1.GatewayController
	// GatewayName and Backend are what Route attaches to and sends to: the Gateway
	// and Service NewGatewayStack created, empty after NewStack.
	GatewayName string
	Backend     string
}

// StackController is the controller name of the Stack called name, for a test that
// starts its controller before it creates the Stack.
func StackController(name string) gatewayv1.GatewayController {
	return gatewayv1.GatewayController("test.example.com/" + name)
}

// NewStack creates the namespace name and the GatewayClass name of the controller
// StackController(name), both deleted when t ends.
func (e *Env) NewStack(t testing.TB, name string) Stack {
	t.Helper()
	s := Stack{Namespace: name, Class: name, Controller: StackController(name)}
	e.Create(t, Namespace(s.Namespace, nil))
	e.Create(t, GatewayClass(s.Class, s.Controller))
	return s
}

// NewGatewayStack is NewStack, then the Service backend (port BackendPort) and the
// Gateway gateway of the class with one listener "http" for HTTP on port.
func (e *Env) NewGatewayStack(t testing.TB, name, gateway string, port int32, backend string) Stack {
	t.Helper()
	s := e.NewStack(t, name)
	s.GatewayName, s.Backend = gateway, backend
	e.Create(t, Service(s.Namespace, backend, BackendPort))
	e.Create(t, s.Gateway(gateway, HTTPListener("http", port)))
	return s
}

// Gateway returns a Gateway of the stack's namespace and class with listeners.
func (s Stack) Gateway(name string, listeners ...gatewayv1.Listener) *gatewayv1.Gateway {
	return Gateway(s.Namespace, name, s.Class, listeners...)
}

// Route returns an HTTPRoute of the stack's namespace for hostnames, attached to the
// stack's Gateway, with one rule sending everything to its backend.
func (s Stack) Route(name string, hostnames ...gatewayv1.Hostname) *gatewayv1.HTTPRoute {
	r := HTTPRoute(s.Namespace, name, []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(s.GatewayName)}}, Backend(s.Backend, BackendPort))
	r.Spec.Hostnames = hostnames
	return r
}
