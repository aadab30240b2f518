//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

// Command oracle-dra runs the kube-scheduler's Dynamic Resource Allocation
// allocator for structured parameters
// (k8s.io/dynamic-resource-allocation/structured) of one Kubernetes release —
// the one this binary is built against — on an allocation case (the format
// of crates/dra/src/case.rs) and prints the outcome. It is test tooling, not
// part of topoalign: the judge the Rust allocator (crates/dra) is checked
// against.
//
//	oracle-dra allocate [--as-this-release] CASE.json|yaml
//	oracle-dra batch        (one case JSON per line on stdin, one outcome JSON per line)
//	oracle-dra features     (the release's structured.Features, Go field names)
//	oracle-dra info         (features, CEL environment, allocator variant, DRA gates)
//	oracle-dra check DIR    (DIR/cases/*.yaml against DIR/<release>/*.json)
//	oracle-dra version
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  oracle-dra allocate [--as-this-release] CASE.json|yaml
  oracle-dra batch        (one case JSON per line on stdin, one outcome JSON per line)
  oracle-dra features
  oracle-dra info
  oracle-dra check DIR
  oracle-dra version
`)
	os.Exit(2)
}

func main() {
	// The allocator logs at V(5) and above; nothing of it belongs on the
	// outcome streams.
	klog.SetLogger(logr.Discard())
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "allocate":
		os.Exit(allocateCommand(os.Args[2:]))
	case "batch":
		os.Exit(batchCommand(os.Args[2:]))
	case "features":
		if len(os.Args) != 2 {
			usage()
		}
		os.Exit(printJSON(os.Stdout, allocatorFeatures(), true))
	case "info":
		if len(os.Args) != 2 {
			usage()
		}
		os.Exit(printJSON(os.Stdout, releaseInfo(), true))
	case "check":
		if len(os.Args) != 3 {
			usage()
		}
		os.Exit(checkCommand(os.Args[2]))
	case "version":
		fmt.Println(release)
	default:
		usage()
	}
}

// allocateCommand: exit 0 with the outcome (allocated, unschedulable or
// error: all three are answers), 2 when the file cannot be read as a case
// (the outcome still printed, an error naming the problem), 1 when the
// harness fails.
func allocateCommand(args []string) int {
	var file string
	asThisRelease := false
	for _, arg := range args {
		switch {
		case arg == "--as-this-release":
			asThisRelease = true
		case file == "" && !strings.HasPrefix(arg, "-"):
			file = arg
		default:
			usage()
		}
	}
	if file == "" {
		usage()
	}
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "oracle-dra: %v\n", err)
		return 1
	}
	c, err := parseCase(data, isYAMLPath(file))
	if err == nil && asThisRelease {
		c.Release = release
	}
	var out outcome
	status := 0
	if err != nil {
		out = invalidCase(err)
		status = 2
	} else {
		out = decide(c)
		if out.invalid {
			status = 2
		}
	}
	if code := printJSON(os.Stdout, out, true); code != 0 {
		return code
	}
	return status
}

func isYAMLPath(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".yaml" || ext == ".yml"
}

// batchCommand answers one case per line of stdin (JSON, the case's own
// release must be this binary's) with one compact outcome line, in order;
// blank lines are skipped. A case that cannot be read, or that makes the
// allocator panic, is answered with an error outcome; the batch goes on.
func batchCommand(args []string) int {
	if len(args) != 0 {
		usage()
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var answer outcome
			if c, perr := parseCase(line, false); perr != nil {
				answer = invalidCase(perr)
			} else {
				answer = decide(c)
			}
			text, merr := json.Marshal(answer)
			if merr != nil {
				text, _ = json.Marshal(oracleError(fmt.Sprintf("encoding the outcome: %v", merr)))
			}
			out.Write(text)
			out.WriteByte('\n')
			// The differential tester reads answer by answer.
			if ferr := out.Flush(); ferr != nil {
				fmt.Fprintf(os.Stderr, "oracle-dra batch: %v\n", ferr)
				return 1
			}
		}
		if errors.Is(err, io.EOF) {
			return 0
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "oracle-dra batch: reading stdin: %v\n", err)
			return 1
		}
	}
}

func printJSON(w io.Writer, v any, indent bool) int {
	var text []byte
	var err error
	if indent {
		text, err = json.MarshalIndent(v, "", "  ")
	} else {
		text, err = json.Marshal(v)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "oracle-dra: encoding JSON: %v\n", err)
		return 1
	}
	text = append(text, '\n')
	if _, err := w.Write(text); err != nil {
		fmt.Fprintf(os.Stderr, "oracle-dra: %v\n", err)
		return 1
	}
	return 0
}
