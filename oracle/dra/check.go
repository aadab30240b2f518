//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// oracle-dra check DIR: every case DIR/cases/NAME.yaml, run as this
// release (its release field replaced by this binary's), must give the
// outcome DIR/<release>/NAME.json (compared as JSON values), and
// DIR/<release>/features.json must be this release's Features. Expected
// files without a case fail too. The last line is "N passed, N failed".

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

func checkCommand(dir string) int {
	caseFiles, err := filepath.Glob(filepath.Join(dir, "cases", "*.yaml"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "oracle-dra check: %v\n", err)
		return 1
	}
	if len(caseFiles) == 0 {
		fmt.Fprintf(os.Stderr, "oracle-dra check: no cases in %s\n", filepath.Join(dir, "cases"))
		return 1
	}
	sort.Strings(caseFiles)
	expectedDir := filepath.Join(dir, release)
	passed, failed := 0, 0
	fail := func(name, format string, args ...any) {
		failed++
		fmt.Printf("FAIL %s: %s\n", name, fmt.Sprintf(format, args...))
	}
	names := map[string]bool{"features": true}

	// The feature table.
	if got, err := json.MarshalIndent(allocatorFeatures(), "", "  "); err != nil {
		fail("features", "%v", err)
	} else if problem := compareWithFile(filepath.Join(expectedDir, "features.json"), got); problem != "" {
		fail("features", "%s", problem)
	} else {
		passed++
	}

	for _, file := range caseFiles {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		names[name] = true
		data, err := os.ReadFile(file)
		if err != nil {
			fail(name, "%v", err)
			continue
		}
		c, err := parseCase(data, true)
		var answer outcome
		if err != nil {
			answer = invalidCase(err)
		} else {
			c.Release = release
			answer = decide(c)
		}
		got, err := json.MarshalIndent(answer, "", "  ")
		if err != nil {
			fail(name, "%v", err)
			continue
		}
		if problem := compareWithFile(filepath.Join(expectedDir, name+".json"), got); problem != "" {
			fail(name, "%s", problem)
			continue
		}
		passed++
	}

	stale, _ := filepath.Glob(filepath.Join(expectedDir, "*.json"))
	for _, file := range stale {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		if !names[name] {
			fail(name, "%s has no case %s", file, filepath.Join(dir, "cases", name+".yaml"))
		}
	}
	fmt.Printf("v%s: %d passed, %d failed\n", release, passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// compareWithFile compares got with the JSON in file as values; "" when
// equal, otherwise a line diff (expected -, got +).
func compareWithFile(file string, got []byte) string {
	want, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	var wantValue, gotValue any
	if err := json.Unmarshal(want, &wantValue); err != nil {
		return fmt.Sprintf("%s: %v", file, err)
	}
	if err := json.Unmarshal(got, &gotValue); err != nil {
		return fmt.Sprintf("the outcome: %v", err)
	}
	if reflect.DeepEqual(wantValue, gotValue) {
		return ""
	}
	wantText, _ := json.MarshalIndent(wantValue, "", "  ")
	gotText, _ := json.MarshalIndent(gotValue, "", "  ")
	return fmt.Sprintf("differs from %s (-expected +got):\n%s", file, lineDiff(string(wantText), string(gotText)))
}

// lineDiff is a plain longest-common-subsequence diff of two short texts.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out bytes.Buffer
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			fmt.Fprintf(&out, "  %s\n", x[i])
			i++
			j++
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&out, "+ %s\n", y[j])
			j++
		default:
			fmt.Fprintf(&out, "- %s\n", x[i])
			i++
		}
	}
	return out.String()
}
