package main

// oracle check: replays every scenario of a vector directory
// (scenarios/NNNN.json, expected/NNNN.json, index.json) through this binary,
// one fresh process per scenario (feature gates are process-global), or with
// --batch through one `oracle batch` process per job (which must give the
// same answers: this is how batch mode is checked), and compares each result
// document with the expected one, accepting the alternative texts index.json
// lists. The last line is "N passed, N failed".

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// shownFailures is how many failures are printed in full.
const shownFailures = 5

type checkResult struct {
	name   string
	output []byte
	diff   string // empty when it passed
}

func checkCommand(args []string) int {
	jobs := 2
	batch := false
	var save, dir string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--jobs" && i+1 < len(args):
			v, err := strconv.Atoi(args[i+1])
			if err != nil || v < 1 {
				usage()
			}
			jobs = v
			i++
		case args[i] == "--batch":
			batch = true
		case args[i] == "--save" && i+1 < len(args):
			save = args[i+1]
			i++
		case dir == "" && !strings.HasPrefix(args[i], "-"):
			dir = args[i]
		default:
			usage()
		}
	}
	if dir == "" {
		usage()
	}
	files, err := filepath.Glob(filepath.Join(dir, "scenarios", "*.json"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "oracle check: no scenarios in %s\n", filepath.Join(dir, "scenarios"))
		return 1
	}
	sort.Strings(files)
	// code-*.json: vectors derived from reading kubelet code this harness
	// cannot call; only the engine's conformance test replays them (none
	// at present: the in-place resize vectors of 1.32-1.35 that were are
	// the real code's answers now).
	kept := files[:0]
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), "code-") {
			kept = append(kept, f)
		}
	}
	if skipped := len(files) - len(kept); skipped > 0 {
		fmt.Fprintf(os.Stderr, "oracle check: %d code-* vectors not replayed (derived from code the harness does not call)\n", skipped)
	}
	files = kept
	alternatives, err := readAlternatives(filepath.Join(dir, "index.json"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "oracle check: %v\n", err)
		return 1
	}
	if save != "" {
		if err := os.MkdirAll(save, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "oracle check: %v\n", err)
			return 1
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "oracle check: %v\n", err)
		return 1
	}

	results := make([]checkResult, len(files))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if batch {
				checkBatch(exe, dir, files, work, results, alternatives)
				return
			}
			for i := range work {
				results[i] = checkOne(exe, dir, files[i], alternatives)
			}
		}()
	}
	for i := range files {
		work <- i
	}
	close(work)
	wg.Wait()

	passed, failed := 0, 0
	for _, r := range results {
		if save != "" {
			if err := writeFileAtomic(filepath.Join(save, r.name+".json"), r.output); err != nil {
				fmt.Fprintf(os.Stderr, "oracle check: %v\n", err)
				return 1
			}
		}
		if r.diff == "" {
			passed++
			continue
		}
		failed++
		if failed <= shownFailures {
			fmt.Printf("FAIL %s: %s\n", r.name, r.diff)
		} else {
			fmt.Printf("FAIL %s\n", r.name)
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// readAlternatives reads index.json's alternativeTexts per scenario.
func readAlternatives(path string) (map[string]map[string][]string, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var index map[string]struct {
		AlternativeTexts map[string][]string `json:"alternativeTexts"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := map[string]map[string][]string{}
	for name, entry := range index {
		if len(entry.AlternativeTexts) > 0 {
			out[name] = entry.AlternativeTexts
		}
	}
	return out, nil
}

func checkOne(exe, dir, file string, alternatives map[string]map[string][]string) checkResult {
	name := strings.TrimSuffix(filepath.Base(file), ".json")
	r := checkResult{name: name}
	cmd := exec.Command(exe, "replay", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	r.output = out
	if err != nil && len(out) == 0 {
		r.diff = fmt.Sprintf("replay failed: %v: %s", err, strings.TrimSpace(stderr.String()))
		return r
	}
	r.diff = compareExpected(dir, name, out, alternatives)
	return r
}

// checkBatch replays the scenarios handed to it through one `oracle batch`
// process.
func checkBatch(exe, dir string, files []string, work <-chan int, results []checkResult, alternatives map[string]map[string][]string) {
	cmd := exec.Command(exe, "batch")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err1 := cmd.StdinPipe()
	stdout, err2 := cmd.StdoutPipe()
	started := err1 == nil && err2 == nil && cmd.Start() == nil
	var answers *bufio.Scanner
	if started {
		answers = bufio.NewScanner(stdout)
		answers.Buffer(make([]byte, 1<<16), 1<<26)
		defer func() {
			stdin.Close()
			_ = cmd.Wait()
		}()
	}
	for i := range work {
		name := strings.TrimSuffix(filepath.Base(files[i]), ".json")
		results[i] = checkResult{name: name}
		if !started {
			results[i].diff = "cannot start oracle batch"
			continue
		}
		abs, _ := filepath.Abs(files[i])
		if _, err := fmt.Fprintln(stdin, abs); err != nil || !answers.Scan() {
			results[i].diff = fmt.Sprintf("oracle batch stopped: %s", strings.TrimSpace(stderr.String()))
			started = false
			continue
		}
		var a batchAnswer
		if err := json.Unmarshal(answers.Bytes(), &a); err != nil {
			results[i].diff = fmt.Sprintf("oracle batch answered %q: %v", answers.Text(), err)
			continue
		}
		out, _ := json.Marshal(a.Document)
		results[i].output = append(out, '\n')
		if a.Status == 1 {
			results[i].diff = fmt.Sprintf("replay failed: %s", a.Stderr)
			continue
		}
		results[i].diff = compareExpected(dir, name, results[i].output, alternatives)
	}
}

// compareExpected compares a result document with expected/NAME.json: empty
// when they agree.
func compareExpected(dir, name string, out []byte, alternatives map[string]map[string][]string) string {
	want, err := os.ReadFile(filepath.Join(dir, "expected", name+".json"))
	if err != nil {
		return err.Error()
	}
	var got, exp any
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Sprintf("output is not JSON: %v: %s", err, out)
	}
	if err := json.Unmarshal(want, &exp); err != nil {
		return fmt.Sprintf("expected/%s.json: %v", name, err)
	}
	acceptAlternatives(got, exp, alternatives[name])
	if !reflect.DeepEqual(got, exp) {
		return fmt.Sprintf("%s\n  expected: %s\n  got:      %s", firstDifference("", exp, got), bytes.TrimSpace(want), bytes.TrimSpace(out))
	}
	return ""
}

// acceptAlternatives replaces a text of got by the expected one when got's is
// one of the texts the kubelet was seen to produce for it ("error" or
// "event N message").
func acceptAlternatives(got, exp any, alts map[string][]string) {
	g, ok1 := got.(map[string]any)
	e, ok2 := exp.(map[string]any)
	if !ok1 || !ok2 {
		return
	}
	for key, texts := range alts {
		var gm, em map[string]any
		var field string
		if key == "error" {
			gm, em, field = g, e, "error"
		} else if parts := strings.Fields(key); len(parts) == 3 && parts[0] == "event" {
			ev, err := strconv.Atoi(parts[1])
			if err != nil {
				continue
			}
			gm, em, field = resultAt(g, ev), resultAt(e, ev), parts[2]
		}
		if gm == nil || em == nil {
			continue
		}
		for _, t := range texts {
			if gm[field] == t {
				gm[field] = em[field]
			}
		}
	}
}

func resultAt(doc map[string]any, event int) map[string]any {
	results, _ := doc["results"].([]any)
	for _, r := range results {
		m, _ := r.(map[string]any)
		if ev, ok := m["event"].(float64); ok && int(ev) == event {
			return m
		}
	}
	return nil
}

// firstDifference names the first place where two JSON values differ.
func firstDifference(path string, exp, got any) string {
	switch e := exp.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range e {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if !reflect.DeepEqual(e[k], g[k]) {
				return firstDifference(path+"."+k, e[k], g[k])
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(e) {
			break
		}
		for i := range e {
			if !reflect.DeepEqual(e[i], g[i]) {
				return firstDifference(fmt.Sprintf("%s[%d]", path, i), e[i], g[i])
			}
		}
	}
	ej, _ := json.Marshal(exp)
	gj, _ := json.Marshal(got)
	return fmt.Sprintf("at %s: expected %s, got %s", strings.TrimPrefix(path, "."), ej, gj)
}
