// Command dockerfile-lint runs BuildKit's own Dockerfile checks (the ones
// `docker build --check` runs) without a Docker engine or a registry, and
// checks what a build would trip over in the build context:
//
//   - every rule of BuildKit's Dockerfile linter, as the `# check=` directive
//     of the Dockerfile configures it, plus BuildKit's parse and stage
//     resolution errors;
//   - every COPY/ADD/RUN --mount=type=bind source taken from the build
//     context exists there and is not excluded by .dockerignore (a build
//     fails on those with "not found").
//
// Base images are not pulled: the image metadata resolver answers every
// FROM with an empty config whose only environment is the default PATH, so
// a Dockerfile that relies on a variable set by its base image (UndefinedVar)
// is reported. With -json it prints the findings and an outline of every
// stage (base, user, exposed ports, entrypoint) for tests to assert on.
//
// Usage: dockerfile-lint [-context DIR] [-json] [Dockerfile]
// Exit status: 0 clean, 1 findings, 2 usage or I/O error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	digest "github.com/opencontainers/go-digest"
)

type finding struct {
	Rule   string `json:"rule"`
	Line   int    `json:"line"`
	Detail string `json:"detail"`
	URL    string `json:"url,omitempty"`
}

type stage struct {
	Name       string   `json:"name,omitempty"`
	Base       string   `json:"base"`
	User       string   `json:"user,omitempty"`
	Expose     []string `json:"expose,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	Workdir    string   `json:"workdir,omitempty"`
}

type report struct {
	Findings []finding `json:"findings"`
	Stages   []stage   `json:"stages"`
}

// offlineResolver stands in for a registry: every base image has an empty
// config with the default PATH.
type offlineResolver struct{}

func (offlineResolver) ResolveImageConfig(_ context.Context, ref string, _ sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	cfg := []byte(`{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}}`)
	return ref, digest.FromBytes(cfg), cfg, nil
}

func main() {
	contextDir := flag.String("context", ".", "build context directory (its .dockerignore applies)")
	asJSON := flag.Bool("json", false, "print findings and a stage outline as JSON")
	flag.Parse()
	file := "Dockerfile"
	if flag.NArg() == 1 {
		file = flag.Arg(0)
	} else if flag.NArg() > 1 {
		fmt.Fprintln(os.Stderr, "usage: dockerfile-lint [-context DIR] [-json] [Dockerfile]")
		os.Exit(2)
	}
	rep, err := lint(file, *contextDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dockerfile-lint: %v\n", err)
		os.Exit(2)
	}
	if *asJSON {
		out, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(out))
	} else {
		for _, f := range rep.Findings {
			fmt.Printf("%s:%d: %s: %s", file, f.Line, f.Rule, f.Detail)
			if f.URL != "" {
				fmt.Printf(" (%s)", f.URL)
			}
			fmt.Println()
		}
	}
	if len(rep.Findings) > 0 {
		os.Exit(1)
	}
}

func lint(file, contextDir string) (*report, error) {
	dt, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	rep := &report{Findings: []finding{}, Stages: []stage{}}

	// The source map names the Dockerfile in findings; BuildKit wants the
	// (here empty) LLB definition it would have been read from.
	sourceMap := llb.NewSourceMap(nil, filepath.Base(file), "Dockerfile", dt)
	sourceMap.Definition = &llb.Definition{}
	results, err := dockerfile2llb.DockerfileLint(context.Background(), dt, dockerfile2llb.ConvertOpt{
		SourceMap:    sourceMap,
		MetaResolver: offlineResolver{},
	})
	if err != nil {
		return nil, err
	}
	for _, w := range results.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		rep.Findings = append(rep.Findings, finding{Rule: w.RuleName, Line: line, Detail: w.Detail, URL: w.URL})
	}
	if results.Error != nil {
		line := 0
		if len(results.Error.Location.Ranges) > 0 {
			line = int(results.Error.Location.Ranges[0].Start.Line)
		}
		rep.Findings = append(rep.Findings, finding{Rule: "BuildError", Line: line, Detail: results.Error.Message})
	}

	ast, err := parser.Parse(strings.NewReader(string(dt)))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", file, err)
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", file, err)
	}
	ignored, err := dockerignore(contextDir)
	if err != nil {
		return nil, err
	}
	for _, st := range stages {
		rep.Stages = append(rep.Stages, outline(st))
		rep.Findings = append(rep.Findings, contextSources(st, contextDir, ignored)...)
	}
	return rep, nil
}

func outline(st instructions.Stage) stage {
	s := stage{Name: st.Name, Base: st.BaseName}
	for _, cmd := range st.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			s.User = c.User
		case *instructions.ExposeCommand:
			s.Expose = append(s.Expose, c.Ports...)
		case *instructions.EntrypointCommand:
			s.Entrypoint = c.CmdLine
		case *instructions.CmdCommand:
			s.Cmd = c.CmdLine
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				s.Env = append(s.Env, kv.String())
			}
		case *instructions.WorkdirCommand:
			s.Workdir = c.Path
		}
	}
	return s
}

func dockerignore(contextDir string) (*patternmatcher.PatternMatcher, error) {
	f, err := os.Open(filepath.Join(contextDir, ".dockerignore"))
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading .dockerignore: %w", err)
	}
	return patternmatcher.New(patterns)
}

// included counts the files at or under p that .dockerignore lets into the
// build context (a directory may be excluded while files in it are allowed
// back in with "!dir/file").
func included(contextDir, p string, ignored *patternmatcher.PatternMatcher) int {
	n := 0
	_ = filepath.WalkDir(p, func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		r, _ := filepath.Rel(contextDir, file)
		if excluded, _ := ignored.MatchesOrParentMatches(filepath.ToSlash(r)); !excluded {
			n++
		}
		return nil
	})
	return n
}

// contextSources checks the sources a stage reads from the build context.
func contextSources(st instructions.Stage, contextDir string, ignored *patternmatcher.PatternMatcher) []finding {
	var out []finding
	check := func(line int, src string) {
		if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") || strings.Contains(src, "$") {
			return // remote or build-arg dependent: not a context path
		}
		rel := strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(src)), "/")
		if rel == "" {
			rel = "."
		}
		matches, _ := filepath.Glob(filepath.Join(contextDir, filepath.FromSlash(rel)))
		if len(matches) == 0 {
			out = append(out, finding{Rule: "ContextSourceMissing", Line: line,
				Detail: fmt.Sprintf("%q does not exist in the build context %s", src, contextDir)})
			return
		}
		if ignored == nil || rel == "." {
			return
		}
		for _, m := range matches {
			if included(contextDir, m, ignored) == 0 {
				r, _ := filepath.Rel(contextDir, m)
				out = append(out, finding{Rule: "ContextSourceIgnored", Line: line,
					Detail: fmt.Sprintf("%q is excluded by .dockerignore, so the build cannot read it", r)})
			}
		}
	}
	for _, cmd := range st.Commands {
		line := 0
		if loc := cmd.Location(); len(loc) > 0 {
			line = loc[0].Start.Line
		}
		switch c := cmd.(type) {
		case *instructions.CopyCommand:
			if c.From == "" {
				for _, src := range c.SourcePaths {
					check(line, src)
				}
			}
		case *instructions.AddCommand:
			for _, src := range c.SourcePaths {
				check(line, src)
			}
		case *instructions.RunCommand:
			for _, m := range instructions.GetMounts(c) {
				if m.Type == instructions.MountTypeBind && m.From == "" {
					check(line, m.Source)
				}
			}
		}
	}
	return out
}
