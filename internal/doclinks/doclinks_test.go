package doclinks_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	schemeRe  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// anchorDropRe is what GitHub drops from a heading to make its anchor:
	// everything but letters, digits, spaces, hyphens and underscores.
	anchorDropRe = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// TestLinks checks every relative link of the documents.
func TestLinks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, name := range []string{"README.md", "ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md"} {
		docs = append(docs, filepath.Join(root, name))
	}
	anchors := map[string]map[string]bool{}
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, link := range linkRe.FindAllStringSubmatch(stripCode(string(text)), -1) {
			target := link[1]
			if schemeRe.MatchString(target) {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: link %s: no file %s", doc, target, file)
				continue
			}
			if fragment == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(t, file)
			}
			if !anchors[file][fragment] {
				t.Errorf("%s: link %s: no heading #%s in %s", doc, target, fragment, file)
			}
		}
	}
}

// stripCode removes fenced code blocks, whose brackets are not links.
func stripCode(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a file:
// lower case, punctuation dropped, spaces as hyphens, and -1, -2... on
// repeats.
func headingAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(file)
	require.NoError(t, err)
	seen := map[string]int{}
	out := map[string]bool{}
	for line := range strings.Lines(stripCode(string(text))) {
		m := headingRe.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		a := strings.ReplaceAll(anchorDropRe.ReplaceAllString(strings.ToLower(m[2]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}
