package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// maxEnvelopeDepth is how many levels a request body of the API wraps
// around the payload it carries: {"instances":[{"params":…}]} is the
// deepest. A body nested deeper than workflow.MaxPayloadDepth plus these is
// refused before it is decoded; the payloads in it are checked exactly
// where they are stored.
const maxEnvelopeDepth = 3

// decodeBody reads the request body (at most MaxBodyBytes) and decodes it
// into v strictly: one JSON object, no unknown fields, no trailing data. An
// empty body leaves v alone when optional is true. The whole body is read
// and checked before the handler does anything with it; a body nested too
// deeply to hold a payload of workflow.MaxPayloadDepth levels is refused
// with workflow.ErrPayloadTooDeep before it is decoded.
func (s *Server) decodeBody(c echo.Context, v any, optional bool) error {
	data, err := s.readAll(c, workflow.MaxPayloadDepth+maxEnvelopeDepth)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return fmt.Errorf("%w: the request body is empty; it must be a JSON object", workflow.ErrInvalidRequest)
	}
	if first := bytes.TrimSpace(data)[0]; first != '{' {
		if !json.Valid(data) {
			return fmt.Errorf("%w: the request body is not valid JSON", workflow.ErrInvalidRequest)
		}
		return fmt.Errorf("%w: the request body must be a JSON object", workflow.ErrInvalidRequest)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", workflow.ErrInvalidRequest, describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: unexpected data after the JSON object", workflow.ErrInvalidRequest)
	}
	return nil
}

// readAll reads the request body, at most MaxBodyBytes, and checks that it
// nests at most depth levels deep.
func (s *Server) readAll(c echo.Context, depth int) ([]byte, error) {
	r := c.Request()
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: the request body is %d bytes, the limit is %d", workflow.ErrPayloadTooLarge, r.ContentLength, limit)
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, fmt.Errorf("%w: the request body is larger than %d bytes", workflow.ErrPayloadTooLarge, limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("%w: the request body did not arrive within %s", apiclient.ErrRequestTimeout, s.cfg.BodyTimeout)
		}
		return nil, fmt.Errorf("%w: reading the request body: %v", workflow.ErrInvalidRequest, err)
	}
	c.Set(bodyReadKey, true)
	if err := workflow.ValidatePayloadDepth("the request body", data, depth); err != nil {
		return nil, err
	}
	return data, nil
}

// describeJSONError says what is wrong with a body in the caller's terms.
func describeJSONError(err error) string {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return fmt.Sprintf("the body must be a JSON object, not %s", te.Value)
		}
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "malformed JSON: the body ends too early"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return msg
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "of another type"
}

// pathParam returns a path parameter, unescaped (echo hands over the escaped
// form when the path holds escapes).
func pathParam(c echo.Context, name string) (string, error) {
	v, err := url.PathUnescape(c.Param(name))
	if err != nil {
		return "", fmt.Errorf("%w: malformed %s in the path", workflow.ErrInvalidRequest, name)
	}
	return v, nil
}

// instanceRef returns the :name and :id path parameters, each within its
// limit.
func (s *Server) instanceRef(c echo.Context) (name, id string, err error) {
	if name, err = s.workflowParam(c); err != nil {
		return "", "", err
	}
	if id, err = pathParam(c, "id"); err != nil {
		return "", "", err
	}
	if err := s.checkID(id); err != nil {
		return "", "", err
	}
	return name, id, nil
}

// workflowParam returns the :name path parameter within
// Limits.MaxWorkflowNameLength.
func (s *Server) workflowParam(c echo.Context) (string, error) {
	name, err := pathParam(c, "name")
	if err != nil {
		return "", err
	}
	if err := s.cfg.Limits.CheckWorkflowName(name); err != nil {
		return "", err
	}
	return name, nil
}

// checkID checks an instance id against Limits.MaxIDLength.
func (s *Server) checkID(id string) error { return s.cfg.Limits.CheckInstanceID(id) }

// checkPayload checks params or an event payload against
// Limits.MaxPayloadBytes; what names it.
func (s *Server) checkPayload(what string, b []byte) error { return s.cfg.Limits.CheckPayload(what, b) }

// checkCreate checks one create request (an instance of a batch when i >= 0)
// against the limits.
func (s *Server) checkCreate(i int, r *apiclient.CreateRequest) error {
	err := s.checkID(r.ID)
	if err == nil {
		err = s.checkPayload("params", r.Params)
	}
	if err != nil && i >= 0 {
		return fmt.Errorf("instance %d: %w", i, err)
	}
	return err
}

// pageSize reads the pageSize query parameter (or its deprecated alias
// name) within Limits.MaxPageSize; absent, it is def, and 0 means the
// lists' default page (paging.DefaultPageSize), each capped at the limit.
func (s *Server) pageSize(q url.Values, name string, def int) (int, error) {
	limit := s.cfg.Limits.MaxPageSize
	if def == 0 && limit < paging.DefaultPageSize {
		def = limit
	}
	return queryInt(q, name, min(def, limit), 1, limit)
}

// query checks that the request has no query parameters but the allowed
// ones, each at most once (except those in repeatable), and returns them.
func query(c echo.Context, allowed []string, repeatable ...string) (url.Values, error) {
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed query string: %v", workflow.ErrInvalidRequest, err)
	}
	for k, vs := range q {
		if k == "namespace" {
			continue // the namespace selector, read by the auth middleware
		}
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("%w: unknown query parameter %q (allowed: %s)", workflow.ErrInvalidRequest, k, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 && !slices.Contains(repeatable, k) {
			return nil, fmt.Errorf("%w: query parameter %q is given %d times", workflow.ErrInvalidRequest, k, len(vs))
		}
	}
	return q, nil
}

// queryInt parses an integer query parameter between lo and hi; absent, it is def.
func queryInt(q url.Values, name string, def, lo, hi int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s must be an integer between %d and %d, got %q", workflow.ErrInvalidRequest, name, lo, hi, v)
	}
	return n, nil
}
