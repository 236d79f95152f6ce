//go:build unix

package main_test

import (
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
)

func listParams(workflowName string, statuses ...dftype.InstanceStatus) client.ListParams {
	return client.ListParams{WorkflowName: workflowName, Statuses: statuses, PageSize: 100}
}

func listHistory() client.HistoryParams { return client.HistoryParams{} }
