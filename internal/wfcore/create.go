package wfcore

import (
	"fmt"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// ValidateCreatePlacement checks the fields of a dftype.CreateRequest that
// place the instance: a Namespace and a Queue (when set) follow the naming
// rules, Priority is in range and a DedupeKey (when set) is valid.
func ValidateCreatePlacement(req *dftype.CreateRequest) error {
	if req.Namespace != "" {
		if err := workflow.ValidateNamespace(req.Namespace); err != nil {
			return err
		}
	}
	if req.Queue != "" {
		if err := workflow.ValidateQueueName(req.Queue); err != nil {
			return err
		}
	}
	if err := workflow.ValidatePriority(req.Priority); err != nil {
		return err
	}
	if req.DedupeKey != "" {
		return workflow.ValidateDedupeKey(req.DedupeKey)
	}
	return nil
}

// DeadlineAt returns the deadline of an instance created at now: the
// request's, else now plus the definition's (its Deadline field; see
// workflow.Definition.SettingsOf for one that depends on the instance),
// else nil. It rejects a request deadline that is not after now.
func DeadlineAt(def workflow.Definition, reqDeadline time.Time, now time.Time) (*time.Time, error) {
	if !reqDeadline.IsZero() {
		if !reqDeadline.After(now) {
			return nil, fmt.Errorf("%w: deadline %s is not in the future", workflow.ErrInvalidRequest, reqDeadline.UTC().Format(time.RFC3339Nano))
		}
		if reqDeadline.Sub(now) > workflow.MaxSleep {
			return nil, fmt.Errorf("%w: deadline %s is more than %s away", workflow.ErrInvalidRequest, reqDeadline.UTC().Format(time.RFC3339Nano), workflow.MaxSleep)
		}
		t := reqDeadline.UTC().Truncate(time.Microsecond)
		return &t, nil
	}
	if def.Deadline > 0 {
		t := now.Add(def.Deadline).UTC().Truncate(time.Microsecond)
		return &t, nil
	}
	return nil, nil
}
