package flow

import (
	"fmt"
	"net/url"
	"strings"
)

// An http step's url template escapes each value for the part of the URL it
// lands in, so that a value from params cannot rewrite the rest of the URL
// ("../../admin?x=1#" stays inside its path segment):
//
//   - in the path, url.PathEscape ("/", "?", "#" and the rest become %XX),
//     and a value that is "." or ".." is refused;
//   - in the query, url.QueryEscape (keys and values alike);
//   - in the fragment, url.PathEscape;
//   - in the host (after "://"), only letters, digits, "." and "-" pass;
//     anything else is refused;
//   - before "://" (a whole URL or a base URL from the context), nothing can
//     be escaped: the flow does not validate.
//
// "${raw:path}" inserts a value as it is: for trusted values that are meant
// to hold URL syntax, such as a base URL from the host's configuration.

type urlPart int

const (
	urlScheme urlPart = iota
	urlHost
	urlPath
	urlQuery
	urlFragment
)

func (p urlPart) String() string {
	return [...]string{"scheme", "host", "path", "query", "fragment"}[p]
}

// urlPartAt tells which part of a URL the text after before lands in.
func urlPartAt(before string) urlPart {
	i := strings.Index(before, "://")
	if i < 0 {
		return urlScheme
	}
	rest := before[i+3:]
	switch {
	case strings.Contains(rest, "#"):
		return urlFragment
	case strings.Contains(rest, "?"):
		return urlQuery
	case strings.Contains(rest, "/"):
		return urlPath
	}
	return urlHost
}

// escapeURLValue escapes a template's value for the part of the URL it
// lands in.
func escapeURLValue(p templatePart, before, value string) (string, error) {
	switch part := urlPartAt(before); part {
	case urlPath:
		if value == "." || value == ".." {
			return "", failure(ErrorNameInvalidInput, "url: ${%s} is %q, which is not allowed in a path", p.source, value)
		}
		return url.PathEscape(value), nil
	case urlQuery:
		return url.QueryEscape(value), nil
	case urlFragment:
		return url.PathEscape(value), nil
	case urlHost:
		if !isHostText(value) {
			return "", failure(ErrorNameInvalidInput, "url: ${%s} is in the URL's host, where a value may hold only letters, digits, '.' and '-' (write ${raw:%s} for a trusted value)", p.source, p.source)
		}
		return value, nil
	default:
		return "", failure(ErrorNameInvalidInput, "url: %s", schemePlaceholderMessage(p))
	}
}

func schemePlaceholderMessage(p templatePart) string {
	return fmt.Sprintf("${%s} comes before the URL's \"://\", where a value cannot be escaped: write ${raw:%s} if it holds a trusted base URL", p.source, p.source)
}

func isHostText(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// validateURLTemplate reports a placeholder that can never be escaped: one
// before "://", unless it is raw. After a raw placeholder the parts are not
// known until the run.
func validateURLTemplate(t parsedTemplate) error {
	var before strings.Builder
	for _, p := range t {
		if p.path == nil {
			before.WriteString(p.literal)
			continue
		}
		if p.raw {
			return nil
		}
		if urlPartAt(before.String()) == urlScheme {
			return fmt.Errorf("%s", schemePlaceholderMessage(p))
		}
		before.WriteString("x") // a value escaped in place changes no part
	}
	return nil
}
