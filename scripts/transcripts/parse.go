package transcripts

import (
	"bufio"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Block is one transcript: a ```console block and its marker.
type Block struct {
	// File is the doc's path, Line the 1-based line of the opening fence.
	File string
	Line int
	// Services are the marker's services and their settings, in order;
	// empty for a "shell" block.
	Services []ServiceSpec
	// Steps are the commands and their expected answers.
	Steps []Step
}

// ServiceSpec is one service of a marker: its name (a directory under
// services/) and the settings it runs with.
type ServiceSpec struct {
	Name string
	// Env holds NAME=value settings, in the marker's order.
	Env [][2]string
}

// Key identifies an instance: the same service with the same settings.
func (s ServiceSpec) Key() string {
	var b strings.Builder
	b.WriteString(s.Name)
	for _, kv := range s.Env {
		b.WriteString(" " + kv[0] + "=" + kv[1])
	}
	return b.String()
}

// Step is one command and the answer the doc shows for it.
type Step struct {
	// Line is the command's 1-based line in the doc.
	Line int
	// Command is the text after "$ ".
	Command string
	// Want is the expected answer, one string per line as written.
	Want []string
}

// Skipped is a block of commands marked not to run, with the reason.
type Skipped struct {
	File   string
	Line   int
	Reason string
}

var (
	markerRE  = regexp.MustCompile(`^<!--\s*transcript:\s*(.*?)\s*-->\s*$`)
	settingRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]*=\S*$`)
)

// Parse extracts the transcripts of one Markdown document. It returns an
// error naming the line of a malformed marker, of a ```console block
// without one, and of any other fenced block holding a command line
// ("$ ") without a skip marker.
func Parse(file, text string) (blocks []Block, skipped []Skipped, err error) {
	var errs []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var (
		lines  []string
		marker string
		markAt int
	)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := markerRE.FindStringSubmatch(line); m != nil {
			marker, markAt = m[1], i+1
			continue
		}
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "```") {
			if trimmed != "" {
				marker = ""
			}
			continue
		}
		lang := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
		start := i + 1
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			body = append(body, lines[i])
		}
		hasCommand := slices.ContainsFunc(body, func(l string) bool { return strings.HasPrefix(l, "$ ") })
		switch {
		case strings.HasPrefix(marker, "skip"):
			reason := strings.TrimSpace(strings.TrimPrefix(marker, "skip"))
			if reason == "" {
				errs = append(errs, fmt.Sprintf("%s:%d: a skip marker needs a reason", file, markAt))
			}
			skipped = append(skipped, Skipped{File: file, Line: start, Reason: reason})
		case lang == "console":
			if marker == "" {
				errs = append(errs, fmt.Sprintf("%s:%d: a ```console block needs a <!-- transcript: ... --> marker on the line before it (see scripts/transcripts)", file, start))
				break
			}
			b, err := parseBlock(file, start, marker, body)
			if err != nil {
				errs = append(errs, err.Error())
				break
			}
			blocks = append(blocks, b)
		case hasCommand:
			errs = append(errs, fmt.Sprintf("%s:%d: a block of commands that is not a ```console transcript: make it one, or mark it <!-- transcript: skip <reason> -->", file, start))
		}
		marker = ""
	}
	if len(errs) > 0 {
		return blocks, skipped, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return blocks, skipped, nil
}

func parseBlock(file string, start int, marker string, body []string) (Block, error) {
	b := Block{File: file, Line: start}
	if marker != "shell" {
		for _, part := range strings.Split(marker, ";") {
			f := strings.Fields(part)
			if len(f) == 0 {
				return b, fmt.Errorf("%s:%d: empty service in marker %q", file, start-1, marker)
			}
			s := ServiceSpec{Name: f[0]}
			for _, kv := range f[1:] {
				if !settingRE.MatchString(kv) {
					return b, fmt.Errorf("%s:%d: marker %q: %q is not NAME=value", file, start-1, marker, kv)
				}
				k, v, _ := strings.Cut(kv, "=")
				s.Env = append(s.Env, [2]string{k, v})
			}
			b.Services = append(b.Services, s)
		}
	}
	for j, l := range body {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			b.Steps = append(b.Steps, Step{Line: start + 1 + j, Command: cmd})
			continue
		}
		if len(b.Steps) == 0 {
			if strings.TrimSpace(l) != "" {
				return b, fmt.Errorf("%s:%d: output before the first command", file, start+1+j)
			}
			continue
		}
		last := &b.Steps[len(b.Steps)-1]
		last.Want = append(last.Want, l)
	}
	if len(b.Steps) == 0 {
		return b, fmt.Errorf("%s:%d: a transcript without a command", file, start)
	}
	return b, nil
}
