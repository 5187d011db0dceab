package dataplane

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/consul-gateway-controller/consul-gateway-controller/sync/contract"
)

// writeProblem is why a Gateway's objects could not be written in a way no retry
// fixes: in Problem, an object of their name exists and another owner controls it; in
// Invalid, the API server refused one as invalid. The zero value is none.
func (c *Controller) writeProblem(key cache.ObjectName) contract.DeploymentState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.problems[key]
}

// setWriteProblem records the Gateway's write problem, and says so when it changed.
func (c *Controller) setWriteProblem(key cache.ObjectName, problem contract.DeploymentState) {
	c.mu.Lock()
	changed := c.problems[key].Problem != problem.Problem || c.problems[key].Invalid != problem.Invalid
	if problem.Problem == "" && problem.Invalid == "" {
		delete(c.problems, key)
	} else {
		c.problems[key] = problem
	}
	c.mu.Unlock()
	if changed {
		c.onProblem(key)
	}
}

// classifyWriteErrors sorts the errors of the Gateway's objects into its write
// problem (a conflict, an invalid object) and the errors to retry.
func classifyWriteErrors(results ...error) (contract.DeploymentState, error) {
	var problem contract.DeploymentState
	var errs []error
	for _, err := range results {
		var conflict notOwnedError
		switch {
		case err == nil:
		case errors.As(err, &conflict):
			problem.Problem = joinProblems(problem.Problem, conflict.Error())
		case isPolicyRefusal(err):
			// Said on the Gateway, with the rule that refused, and retried: what lifts
			// it (the namespace's opt-in label, another writer's field removed) is no
			// event of the Gateway.
			problem.Invalid = joinProblems(problem.Invalid, "An admission policy refused a gateway object: "+err.Error())
			errs = append(errs, err)
		case apierrors.IsInvalid(err):
			problem.Invalid = joinProblems(problem.Invalid, "The API server refused a gateway object: "+err.Error())
		default:
			errs = append(errs, err)
		}
	}
	return problem, errors.Join(errs...)
}

func joinProblems(problems, problem string) string {
	if problems == "" {
		return problem
	}
	return problems + "; " + problem
}
