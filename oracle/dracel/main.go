// Command dracel evaluates DRA CEL device selectors with the real
// k8s.io/dynamic-resource-allocation/cel package of one Kubernetes release
// (the one this binary is built against): the compiler the kube-scheduler's
// allocator gets from cel.NewCache (stored-expression environment, cost
// estimation off) and CompilationResult.DeviceMatches. It is test tooling
// for crates/dra/src/selector.rs, not part of topoalign.
//
//	dracel eval            cases on stdin, one JSON object a line; each comes
//	                       back on stdout with "want" added
//	dracel vectors SPEC    every case of a spec file (see cases.json), evaluated
//	dracel decls           the environment's functions and overloads, one a line
//	dracel release         the Kubernetes release this binary is built against
//
// A case:
//
//	{"expression": "device.driver == 'gpu.example.com'",
//	 "device": {"driver": "gpu.example.com",
//	            "attributes": {"model": {"string": "a100"}},   // resource.k8s.io/v1 DeviceAttribute
//	            "capacity": {"memory": {"value": "80Gi"}},      // resource.k8s.io/v1 DeviceCapacity
//	            "allowMultipleAllocations": true},              // optional
//	 "features": {"ConsumableCapacity": true, "ListTypeAttributes": true}}
//
// "want" is one of {"matches": BOOL}, {"compileError": MESSAGE} or
// {"runtimeError": MESSAGE}; a spec group may add "topoalign": "unsupported"
// to its vectors (what topoalign knowingly refuses). The device is read into the release's own
// resource.k8s.io/v1 types, so fields the release does not have (list
// attributes before 1.36) are dropped as the API server would; the case is
// echoed as it was given.
//
// Build (from oracle/):
//
//	go build -mod=readonly -modfile versions/1.37/go.mod -tags k8s_1_37 -o /tmp/dracel ./dracel
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/google/cel-go/checker"
	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// features are the DRA feature gates a case names, by their
// k8s.io/dynamic-resource-allocation/structured.Features names (the JSON of
// crates/dra's Features). Only those the CEL compiler takes matter; the
// others are accepted and ignored.
type features struct {
	ConsumableCapacity bool
	ListTypeAttributes bool
}

type device struct {
	Driver                   string                                                    `json:"driver"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
}

type verdict struct {
	Matches      *bool   `json:"matches,omitempty"`
	CompileError *string `json:"compileError,omitempty"`
	RuntimeError *string `json:"runtimeError,omitempty"`
}

// vector is a case and its answer, the line written to testdata/dra/cel.
type vector struct {
	Expression string          `json:"expression"`
	Device     json.RawMessage `json:"device"`
	Features   json.RawMessage `json:"features"`
	Want       verdict         `json:"want"`
	// Topoalign is "unsupported" for what cel-go evaluates and topoalign
	// refuses (from the spec's group; the Go verdict is still the real one).
	Topoalign string `json:"topoalign,omitempty"`
}

func usage() {
	fmt.Fprintf(os.Stderr, `usage:
  dracel eval            (cases on stdin, vectors on stdout)
  dracel vectors SPEC    (every case of SPEC, evaluated)
  dracel decls           (the environment's functions)
  dracel release
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "eval":
		err = evalStream(os.Stdin, os.Stdout)
	case "vectors":
		if len(os.Args) != 3 {
			usage()
		}
		err = vectors(os.Args[2], os.Stdout)
	case "decls":
		err = decls(os.Stdout)
	case "release":
		fmt.Println(release)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dracel:", err)
		os.Exit(1)
	}
}

// caches holds one cache per feature set, as the scheduler holds one for
// its gates.
var caches = map[features]*dracel.Cache{}

func cacheFor(f features) *dracel.Cache {
	c, ok := caches[f]
	if !ok {
		c = dracel.NewCache(10, celFeatures(f))
		caches[f] = c
	}
	return c
}

// evaluate answers one case as the allocator's selector check does.
func evaluate(expression string, dev device, f features) verdict {
	result := cacheFor(f).GetOrCompile(expression)
	if result.Error != nil {
		msg := result.Error.Error()
		return verdict{CompileError: &msg}
	}
	input := dracel.Device{
		Driver:                   dev.Driver,
		AllowMultipleAllocations: dev.AllowMultipleAllocations,
		Attributes:               dev.Attributes,
		Capacity:                 dev.Capacity,
	}
	matches, _, err := result.DeviceMatches(context.Background(), input)
	if err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "attribute ") {
			msg = firstBadAttribute(result, input, msg)
		}
		return verdict{RuntimeError: &msg}
	}
	return verdict{Matches: &matches}
}

// firstBadAttribute names the first attribute, in name order, that the
// release cannot read: DeviceMatches stops at the first it meets in Go's
// map order, which differs from run to run, and the vectors should not.
func firstBadAttribute(result dracel.CompilationResult, input dracel.Device, fallback string) string {
	names := make([]string, 0, len(input.Attributes))
	for name := range input.Attributes {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		one := input
		one.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			resourceapi.QualifiedName(name): input.Attributes[resourceapi.QualifiedName(name)],
		}
		if _, _, err := result.DeviceMatches(context.Background(), one); err != nil && strings.HasPrefix(err.Error(), "attribute ") {
			return err.Error()
		}
	}
	return fallback
}

type caseLine struct {
	Expression *string         `json:"expression"`
	Device     json.RawMessage `json:"device"`
	Features   json.RawMessage `json:"features"`
}

func evalCase(c caseLine) (vector, error) {
	if c.Expression == nil {
		return vector{}, errors.New("a case without an expression")
	}
	if len(c.Device) == 0 {
		return vector{}, errors.New("a case without a device")
	}
	if len(c.Features) == 0 {
		c.Features = json.RawMessage("{}")
	}
	var dev device
	if err := json.Unmarshal(c.Device, &dev); err != nil {
		return vector{}, fmt.Errorf("device %s: %w", c.Device, err)
	}
	var f features
	if err := json.Unmarshal(c.Features, &f); err != nil {
		return vector{}, fmt.Errorf("features %s: %w", c.Features, err)
	}
	return vector{
		Expression: *c.Expression,
		Device:     c.Device,
		Features:   c.Features,
		Want:       evaluate(*c.Expression, dev, f),
	}, nil
}

func evalStream(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	w := bufio.NewWriter(out)
	line := 0
	for scanner.Scan() {
		line++
		text := strings.TrimSpace(scanner.Text())
		if text == "" {
			continue
		}
		var c caseLine
		if err := json.Unmarshal([]byte(text), &c); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		v, err := evalCase(c)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := writeJSON(w, v); err != nil {
			return err
		}
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	return w.Flush()
}

// spec is the file vectors.sh evaluates: named devices, the feature sets
// every group runs under unless it names its own, and groups of
// expressions, each evaluated on each of its devices under each feature
// set.
type spec struct {
	Devices  map[string]json.RawMessage `json:"devices"`
	Features []json.RawMessage          `json:"features"`
	Groups   []struct {
		Comment     string            `json:"comment"`
		Topoalign   string            `json:"topoalign"`
		Releases    []string          `json:"releases"`
		Devices     []string          `json:"devices"`
		Features    []json.RawMessage `json:"features"`
		Expressions []string          `json:"expressions"`
	} `json:"groups"`
}

func vectors(path string, out io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s spec
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	w := bufio.NewWriter(out)
	for i, g := range s.Groups {
		if len(g.Releases) > 0 && !contains(g.Releases, release) {
			continue
		}
		featureSets := g.Features
		if len(featureSets) == 0 {
			featureSets = s.Features
		}
		if len(featureSets) == 0 {
			featureSets = []json.RawMessage{json.RawMessage("{}")}
		}
		if len(g.Devices) == 0 {
			return fmt.Errorf("%s: group %d (%s) names no device", path, i, g.Comment)
		}
		for _, expr := range g.Expressions {
			for _, name := range g.Devices {
				dev, ok := s.Devices[name]
				if !ok {
					return fmt.Errorf("%s: group %d (%s): no device %q", path, i, g.Comment, name)
				}
				for _, f := range featureSets {
					e := expr
					v, err := evalCase(caseLine{Expression: &e, Device: dev, Features: f})
					if err != nil {
						return fmt.Errorf("%s: group %d (%s): %w", path, i, g.Comment, err)
					}
					v.Topoalign = g.Topoalign
					if err := writeJSON(w, v); err != nil {
						return err
					}
				}
			}
		}
	}
	return w.Flush()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeJSON writes v as one compact line, without Go's HTML escaping (so
// the vector files read as the expressions were written).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// decls prints the functions of the selector environment (the stored
// expressions' environment, under every feature set that changes it), one
// overload a line: function, overload id, member or global, and the
// signature. Functions are sorted by name; a function's overloads keep
// their declaration order, which the checker's overload resolution depends
// on. Then the device variable's field types under each feature set.
func decls(out io.Writer) error {
	seen := map[string]bool{}
	overloads := map[string][]string{}
	var fields []string
	for _, f := range []features{{}, {ConsumableCapacity: true}, {ListTypeAttributes: true}, {ConsumableCapacity: true, ListTypeAttributes: true}} {
		result := cacheFor(f).GetOrCompile("true")
		if result.Error != nil {
			return result.Error
		}
		env := result.Environment
		for name, fn := range env.Functions() {
			for _, o := range fn.OverloadDecls() {
				kind := "global"
				if o.IsMemberFunction() {
					kind = "member"
				}
				args := make([]string, 0, len(o.ArgTypes()))
				for _, t := range o.ArgTypes() {
					args = append(args, checker.FormatCELType(t))
				}
				line := fmt.Sprintf("%s\t%s\t%s\t(%s) -> %s", name, o.ID(), kind, strings.Join(args, ", "), checker.FormatCELType(o.ResultType()))
				if !seen[line] {
					seen[line] = true
					overloads[name] = append(overloads[name], line)
				}
			}
		}
		// The device variable's fields, as the checker sees them.
		provider := env.CELTypeProvider()
		for _, v := range env.Variables() {
			if v.Name() != "device" {
				continue
			}
			typeName := v.Type().TypeName()
			for _, name := range []string{"allowMultipleAllocations", "attributes", "capacity", "driver"} {
				field, ok := provider.FindStructFieldType(typeName, name)
				if !ok {
					continue
				}
				line := fmt.Sprintf("field\t%s.%s\t%s\t%s", v.Name(), name, checker.FormatCELType(field.Type), featureNote(f))
				if !seen[line] {
					seen[line] = true
					fields = append(fields, line)
				}
			}
		}
	}
	names := make([]string, 0, len(overloads))
	for name := range overloads {
		names = append(names, name)
	}
	sort.Strings(names)
	sort.Strings(fields)
	w := bufio.NewWriter(out)
	for _, name := range names {
		for _, l := range overloads[name] {
			fmt.Fprintln(w, l)
		}
	}
	for _, l := range fields {
		fmt.Fprintln(w, l)
	}
	return w.Flush()
}

func featureNote(f features) string {
	return fmt.Sprintf("ConsumableCapacity=%v ListTypeAttributes=%v", f.ConsumableCapacity, f.ListTypeAttributes)
}
