// A session against a running `duraflow dev` with a client generated from
// the OpenAPI document it serves (openapi-typescript's types, openapi-fetch's
// calls), as a user of the API would write it. It needs the server that
// TestTypeScriptClient (cmd/duraflow) starts: a token with every scope and
// tick, the tick route, the trigger POST /hooks/hello and the demo
// workflows. DURAFLOW_URL is its address, DURAFLOW_TOKEN the token.

import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

type Instance = components["schemas"]["Instance"];
type InstanceStatus = components["schemas"]["InstanceStatus"];
type FlowDefinition = components["schemas"]["FlowDefinition"];
type CreateInstanceRequest = components["schemas"]["CreateInstanceRequest"];

const baseUrl = process.env.DURAFLOW_URL;
const token = process.env.DURAFLOW_TOKEN;
if (!baseUrl || !token) {
  throw new Error("DURAFLOW_URL and DURAFLOW_TOKEN must be set");
}

const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
const run = Date.now().toString(36);

function check(ok: boolean, what: string): asserts ok {
  if (!ok) {
    throw new Error(`check failed: ${what}`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

// must returns the data of a successful answer, or throws with its error.
function must<T>(what: string, r: { data?: T; error?: unknown; response: Response }): T {
  if (r.data === undefined) {
    throw new Error(`${what}: ${r.response.status} ${JSON.stringify(r.error)}`);
  }
  return r.data;
}

async function waitFor(workflow: string, id: string, statuses: InstanceStatus[]): Promise<Instance> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const inst = must(
      `get ${workflow}/${id}`,
      await client.GET("/api/workflows/{name}/instances/{id}", { params: { path: { name: workflow, id } } }),
    );
    if (statuses.includes(inst.details.status)) {
      return inst;
    }
    if (Date.now() > deadline) {
      throw new Error(`${workflow}/${id} is ${inst.details.status}, not ${statuses.join(" or ")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// The server: its document, index and workflows.
const doc = must("openapi.json", await client.GET("/api/openapi.json"));
check(doc.openapi.startsWith("3.1"), `OpenAPI version ${doc.openapi}`);
const index = must("index", await client.GET("/api"));
check(index.name === "Duraflow", "the index names the server");
const workflows = must("workflows", await client.GET("/api/workflows"));
check(workflows.workflows.some((w) => w.name === "hello"), "hello is registered");

// Create, get, list.
const helloId = `ts-hello-${run}`;
const params: CreateInstanceRequest["params"] = { name: "Ada" };
const created = await client.POST("/api/workflows/{name}/instances", {
  params: { path: { name: "hello" } },
  body: { id: helloId, params, priority: 5 },
});
check(created.response.status === 201, `create answers 201, not ${created.response.status}`);
check(must("create", created).id === helloId, "the created id");
const hello = await waitFor("hello", helloId, ["complete"]);
const output = hello.details.output;
check(isObject(output) && output.greeting === "Hello, Ada!", `hello's output ${JSON.stringify(output)}`);

const batch = must(
  "batch",
  await client.POST("/api/workflows/{name}/instances/batch", {
    params: { path: { name: "hello" } },
    body: { instances: [{ params: { name: "Bob" } }, { id: `ts-batch-${run}`, params: { name: "Cy" } }] },
  }),
);
check(batch.instances.length === 2, "the batch created two instances");

const page = must(
  "list",
  await client.GET("/api/workflows/{name}/instances", {
    params: { path: { name: "hello" }, query: { status: ["complete", "queued", "running"], pageSize: 50 } },
  }),
);
check(page.instances.some((i) => i.id === helloId), "the list holds the instance");
const all = must("list every workflow", await client.GET("/api/instances", { params: { query: { pageSize: 1 } } }));
check(all.instances.length === 1 && all.hasNextPage && all.cursor !== undefined, "a page of one with a cursor");
const next = must(
  "next page",
  await client.GET("/api/instances", { params: { query: { pageSize: 1, cursor: all.cursor } } }),
);
check(next.instances.length === 1, "the next page");

const history = must(
  "history",
  await client.GET("/api/workflows/{name}/instances/{id}/history", { params: { path: { name: "hello", id: helloId } } }),
);
check(history.steps.length > 0, "the history has steps");
const lifecycle = must(
  "lifecycle events",
  await client.GET("/api/events", {
    params: { query: { workflow: "hello", instance: helloId, type: ["instance.created", "instance.completed"] } },
  }),
);
check(lifecycle.events.length === 2, `two lifecycle events, not ${lifecycle.events.length}`);

// An event, and the life cycle of a waiting instance.
const approvalId = `ts-approval-${run}`;
must(
  "create approval",
  await client.POST("/api/workflows/{name}/instances", {
    params: { path: { name: "approval" } },
    body: { id: approvalId, params: { amount: 120, timeout: "1 hour" } },
  }),
);
await waitFor("approval", approvalId, ["waiting"]);
const sent = await client.POST("/api/workflows/{name}/instances/{id}/events", {
  params: { path: { name: "approval", id: approvalId } },
  body: { type: "approval", payload: { approved: true } },
});
check(sent.response.status === 202, `an event answers 202, not ${sent.response.status}`);
const approved = await waitFor("approval", approvalId, ["complete"]);
check(isObject(approved.details.output) && approved.details.output.approved === true, "approved");

const pausedId = `ts-paused-${run}`;
must(
  "create approval to pause",
  await client.POST("/api/workflows/{name}/instances", {
    params: { path: { name: "approval" } },
    body: { id: pausedId, params: { amount: 7 } },
  }),
);
await waitFor("approval", pausedId, ["waiting"]);
const ref = { params: { path: { name: "approval", id: pausedId } } };
const paused = must("pause", await client.POST("/api/workflows/{name}/instances/{id}/pause", ref));
check(paused.details.status === "paused", `paused, not ${paused.details.status}`);
must("resume", await client.POST("/api/workflows/{name}/instances/{id}/resume", ref));
const terminated = must("terminate", await client.POST("/api/workflows/{name}/instances/{id}/terminate", ref));
check(terminated.details.status === "terminated", "terminated");
const again = await client.POST("/api/workflows/{name}/instances/{id}/pause", ref);
check(again.response.status === 409 && again.error?.error.code === "INSTANCE_TERMINAL", "pausing a terminal instance is 409");
const resumed = must("resume, terminal", await client.POST("/api/workflows/{name}/instances/{id}/resume", ref));
check(resumed.details.status === "terminated", "resuming a terminal instance leaves it as it is");
const restarted = must("restart", await client.POST("/api/workflows/{name}/instances/{id}/restart", { ...ref, body: {} }));
check(restarted.runNumber === 2, "a new run");

// Refusals carry their code.
const badId = await client.POST("/api/workflows/{name}/instances", {
  params: { path: { name: "hello" } },
  body: { id: "no way" },
});
check(badId.error?.error.code === "INVALID_INSTANCE_ID", `a bad id: ${JSON.stringify(badId.error)}`);
const unknown = await client.GET("/api/workflows/{name}/instances/{id}", { params: { path: { name: "nope", id: "x" } } });
check(unknown.response.status === 404 && unknown.error?.error.code === "WORKFLOW_NOT_FOUND", "an unknown workflow");

// A flow, typed as the document describes it.
const flowId = `ts-doubler-${run}`;
const definition: FlowDefinition = {
  id: flowId,
  version: "1.0.0",
  initialStepId: "double",
  output: "result",
  steps: {
    double: { id: "double", type: "transform", config: { expression: "n * 2" }, outputKey: "result", timeout: "10 seconds" },
  },
};
const applied = await client.POST("/api/flows", { body: definition });
check(applied.response.status === 201, `a flow applied: ${applied.response.status} ${JSON.stringify(applied.error)}`);
const flowInstance = must(
  "create a flow instance",
  await client.POST("/api/workflows/{name}/instances", { params: { path: { name: flowId } }, body: { params: { n: 21 } } }),
);
const doubled = await waitFor(flowId, flowInstance.id, ["complete", "errored"]);
check(doubled.details.output === 42, `the flow's output ${JSON.stringify(doubled.details)}`);
must("flow versions", await client.GET("/api/flows/{id}/versions", { params: { path: { id: flowId } } }));

// Schedules, queues, workers, the tick and a trigger.
const scheduleId = `ts-schedule-${run}`;
must(
  "create schedule",
  await client.POST("/api/schedules", { body: { id: scheduleId, workflowName: "hello", cron: "@daily", params: { name: "cron" } } }),
);
must("disable schedule", await client.POST("/api/schedules/{id}/disable", { params: { path: { id: scheduleId } } }));
const deleted = await client.DELETE("/api/schedules/{id}", { params: { path: { id: scheduleId } } });
check(deleted.response.status === 204, "schedule deleted");
const queue = must(
  "set queue limits",
  await client.PUT("/api/queues/{name}", { params: { path: { name: `ts-${run}` } }, body: { maxRunning: 3, rate: { limit: 10, period: "1m" } } }),
);
check(queue.maxRunning === 3, "the queue's limit");
const workers = must("workers", await client.GET("/api/workers", { params: { query: { status: "online" } } }));
check(workers.workers.length > 0, "a worker is online");
const tick = must("tick", await client.POST("/api/_runner/tick", { body: { maxInstances: 10 } }));
check(tick.maxInstances === 10, "the tick's bound");
const triggered = await client.POST("/hooks/hello", { body: { name: "Hook" } });
check(triggered.response.status === 202 && triggered.data !== undefined, `the trigger answers 202: ${triggered.response.status}`);
await waitFor("hello", triggered.data.instanceId, ["complete"]);

console.log(`session: ok (${run})`);
