// Package jsonvalue holds what the flow packages share about decoded JSON
// values (nil, bool, json.Number, string, []any, map[string]any).
package jsonvalue

import (
	"encoding/json"
	"fmt"
)

// TypeName names the JSON type of v for messages: "null", "boolean",
// "number", "string", "array" or "object", and the Go type for anything
// else.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64, float32, int, int64, int32, uint, uint64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
