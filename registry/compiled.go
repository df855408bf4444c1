package registry

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"golang.org/x/sync/singleflight"

	switchboard "github.com/switchboardhq/switchboard"
)

// compiledFormat is the version of the compiled registry's encoding. A
// file of another version is never read: it is recompiled and replaced.
const compiledFormat = 4

// compiledMagic starts every compiled registry file, followed by the
// format version, a newline, the hex sha256 of the payload, a newline and
// the payload.
const compiledMagic = "switchboard-compiled-registry "

// Compiled keeps compiled registries in their compact runtime form and,
// when Dir is set, caches them on disk, so that a connector package is
// compiled from its OpenAPI description once per content hash rather than
// at every start.
//
// The compact form holds what dispatch, validation, describe and
// tools/list need: the entities with their tool schemas, and every
// operation's request shape. An operation's input schema is kept encoded
// and decoded on first use (Validate, Describe, BuildRequest), once, by
// whichever caller comes first (sync.Once; concurrent first calls wait for
// that one decode). Operations' output schemas are not kept: they serve
// only to derive the entities' output schemas at compile time.
//
// A cache file is named by the sha256 of the format version, Compiler,
// and the sha256 of the description and of the mapping, so that a changed
// package or compiler reads another file. It carries the format version,
// a checksum of its content and its key: a file that is truncated,
// altered, of another format or another key is recompiled and rewritten,
// never trusted. Files are written atomically (a temporary file in Dir,
// then a rename), so several processes may share Dir: the worst case is
// that two compile the same package at the same time and one rename wins
// with the same content. Within a process, concurrent loads of one package
// compile it once (singleflight).
type Compiled struct {
	// Dir is the cache directory, created when needed; "" keeps the
	// compact form without a disk cache (every start compiles).
	Dir string
	// Compiler identifies the compiler (its version and build): files
	// written by another compiler are never read.
	Compiler string

	group            singleflight.Group
	compiled, cached atomic.Int64
}

// Counts returns how many registries c compiled and how many it read from
// its cache so far.
func (c *Compiled) Counts() (compiled, cached int) {
	return int(c.compiled.Load()), int(c.cached.Load())
}

// key is the cache key of a description and mapping, given their sha256
// in hex as verified against the catalog index ("" for no mapping).
func (c *Compiled) key(specSHA, mappingSHA string) string {
	h := sha256.New()
	fmt.Fprintf(h, "format %d\ncompiler %q\nspec %s\nmapping %s\n", compiledFormat, c.Compiler, specSHA, mappingSHA)
	return hex.EncodeToString(h.Sum(nil))
}

// spec returns the compact registry of a description: from the cache when
// it holds a sound file for key, else compiled (and cached).
func (c *Compiled) spec(key string, spec, mapping []byte, compile Compiler) (*Spec, error) {
	v, err, _ := c.group.Do(key, func() (any, error) {
		if b, err := c.read(key); err == nil {
			if s, err := decodeSpec(b, key); err == nil {
				c.cached.Add(1)
				return s, nil
			}
		}
		api, err := compile(spec, mapping)
		if err != nil {
			return nil, err
		}
		if api == nil {
			return nil, errors.New("no registry")
		}
		c.compiled.Add(1)
		b, err := encodeSpec(api, key)
		if err != nil {
			// Not expressible in the compact form (see wireSchema):
			// served as compiled, and compiled again next time.
			return api, nil
		}
		// A cache that cannot be written costs the next start a compile,
		// nothing else.
		_ = c.write(key, b)
		return decodeSpec(b, key)
	})
	if err != nil {
		return nil, err
	}
	return v.(*Spec), nil
}

// path is the cache file of key.
func (c *Compiled) path(key string) string { return filepath.Join(c.Dir, key+".registry") }

func (c *Compiled) read(key string) ([]byte, error) {
	if c.Dir == "" {
		return nil, os.ErrNotExist
	}
	return os.ReadFile(c.path(key))
}

// write writes b as key's file atomically. It does not fsync: a file torn
// by a crash fails its checksum and is recompiled.
func (c *Compiled) write(key string, b []byte) error {
	if c.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return writeFileAtomic(c.path(key), b)
}

// compiledSpec is the payload of a compiled registry file.
type compiledSpec struct {
	Key      string           `json:"key"`
	Title    string           `json:"title"`
	Servers  []string         `json:"servers,omitempty"`
	Problems []string         `json:"problems,omitempty"`
	Entities []compiledEntity `json:"entities"`
	Ops      []compiledOp     `json:"ops"`
}

type compiledEntity struct {
	Name         string           `json:"name"`
	Description  string           `json:"description"`
	InputSchema  json.RawMessage  `json:"input,omitempty"`
	OutputSchema json.RawMessage  `json:"output,omitempty"`
	Compact      bool             `json:"compact,omitempty"`
	Annotations  Annotations      `json:"annotations"`
	Actions      []compiledAction `json:"actions"`
}

// compiledAction names its operation by index in compiledSpec.Ops, or -1
// for none.
type compiledAction struct {
	Name string `json:"name"`
	Op   int    `json:"op"`
}

type compiledOp struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Summary     string          `json:"summary,omitempty"`
	Description string          `json:"description,omitempty"`
	Deprecated  bool            `json:"deprecated,omitempty"`
	Server      string          `json:"server,omitempty"`
	Accept      string          `json:"accept,omitempty"`
	Security    [][]string      `json:"security,omitempty"`
	Params      []compiledParam `json:"params,omitempty"`
	Body        *compiledBody   `json:"body,omitempty"`
	// Input is the operation's input schema, decoded on first use.
	Input json.RawMessage `json:"input,omitempty"`
}

// compiledParam is a Param; its schema is the input schema's property of
// its argument unless Schema is set.
type compiledParam struct {
	Name        string          `json:"name"`
	Arg         string          `json:"arg,omitempty"`
	In          string          `json:"in"`
	Required    bool            `json:"required,omitempty"`
	Style       string          `json:"style,omitempty"`
	Explode     *bool           `json:"explode,omitempty"`
	ContentType string          `json:"content_type,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	NoSchema    bool            `json:"no_schema,omitempty"`
}

// compiledBody is a Body; its schema is the input schema's "body"
// property unless Schema is set.
type compiledBody struct {
	ContentType string              `json:"content_type"`
	Required    bool                `json:"required,omitempty"`
	Encoding    map[string]Encoding `json:"encoding,omitempty"`
	Schema      json.RawMessage     `json:"schema,omitempty"`
	NoSchema    bool                `json:"no_schema,omitempty"`
}

// encodeSpec encodes a freshly compiled registry as a compiled registry
// file for key.
func encodeSpec(api *Spec, key string) ([]byte, error) {
	out := compiledSpec{Key: key, Title: api.Title, Servers: api.Servers, Problems: api.Problems}
	index := map[*Operation]int{}
	for _, e := range api.Entities {
		ce := compiledEntity{Name: e.Name, Description: e.Description, Compact: e.Compact, Annotations: e.Annotations}
		var err error
		if ce.InputSchema, err = encodeSchema(e.InputSchema); err != nil {
			return nil, fmt.Errorf("entity %s: %w", e.Name, err)
		}
		if ce.OutputSchema, err = encodeSchema(e.OutputSchema); err != nil {
			return nil, fmt.Errorf("entity %s: %w", e.Name, err)
		}
		for _, a := range e.Actions {
			ca := compiledAction{Name: a.Name, Op: -1}
			if a.Op != nil {
				i, ok := index[a.Op]
				if !ok {
					op, err := encodeOp(a.Op)
					if err != nil {
						return nil, fmt.Errorf("operation %s: %w", a.Op.Name, err)
					}
					i = len(out.Ops)
					index[a.Op] = i
					out.Ops = append(out.Ops, op)
				}
				ca.Op = i
			}
			ce.Actions = append(ce.Actions, ca)
		}
		out.Entities = append(out.Entities, ce)
	}
	payload, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	b.Grow(len(payload) + 128)
	b.WriteString(compiledMagic + strconv.Itoa(compiledFormat) + "\n" + hex.EncodeToString(sum[:]) + "\n")
	b.Write(payload)
	return b.Bytes(), nil
}

func encodeOp(o *Operation) (compiledOp, error) {
	if err := o.load(); err != nil {
		return compiledOp{}, err
	}
	co := compiledOp{ID: o.ID, Name: o.Name, Method: o.Method, Path: o.Path, Summary: o.Summary,
		Description: o.Description, Deprecated: o.Deprecated, Server: o.Server, Accept: o.Accept, Security: o.Security}
	var props map[string]*jsonschema.Schema
	if o.InputSchema != nil {
		b, err := encodeSchema(o.InputSchema)
		if err != nil {
			return compiledOp{}, err
		}
		co.Input = b
		props = o.InputSchema.Properties
	}
	// own encodes a schema that is not the input schema's property arg.
	own := func(s *jsonschema.Schema, arg string) (json.RawMessage, bool, error) {
		if s == nil {
			return nil, true, nil
		}
		if props[arg] == s {
			return nil, false, nil
		}
		b, err := encodeSchema(s)
		return b, false, err
	}
	for _, p := range o.Params {
		cp := compiledParam{Name: p.Name, Arg: p.Arg, In: p.In, Required: p.Required, Style: p.Style,
			Explode: p.Explode, ContentType: p.ContentType}
		var err error
		if cp.Schema, cp.NoSchema, err = own(p.Schema, p.ArgName()); err != nil {
			return compiledOp{}, err
		}
		co.Params = append(co.Params, cp)
	}
	if o.Body != nil {
		cb := &compiledBody{ContentType: o.Body.ContentType, Required: o.Body.Required, Encoding: o.Body.Encoding}
		var err error
		if cb.Schema, cb.NoSchema, err = own(o.Body.Schema, "body"); err != nil {
			return compiledOp{}, err
		}
		co.Body = cb
	}
	return co, nil
}

// errCompiled is why a compiled registry file is not used.
func errCompiled(why string) error { return errors.New("compiled registry: " + why) }

// decodeSpec decodes a compiled registry file, checking its format,
// checksum and key. Operations' schemas stay encoded until first use.
func decodeSpec(b []byte, key string) (*Spec, error) {
	rest, ok := bytes.CutPrefix(b, []byte(compiledMagic))
	if !ok {
		return nil, errCompiled("not a compiled registry")
	}
	version, rest, ok := bytes.Cut(rest, []byte("\n"))
	if !ok || string(version) != strconv.Itoa(compiledFormat) {
		return nil, errCompiled("another format version")
	}
	sumHex, payload, ok := bytes.Cut(rest, []byte("\n"))
	sum := sha256.Sum256(payload)
	if !ok || string(sumHex) != hex.EncodeToString(sum[:]) {
		return nil, errCompiled("checksum mismatch")
	}
	var in compiledSpec
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, errCompiled("undecodable: " + err.Error())
	}
	if in.Key != key {
		return nil, errCompiled("written for another package")
	}
	ops := make([]*Operation, len(in.Ops))
	for i, co := range in.Ops {
		o := &Operation{ID: co.ID, Name: co.Name, Method: co.Method, Path: co.Path, Summary: co.Summary,
			Description: co.Description, Deprecated: co.Deprecated, Server: co.Server, Accept: co.Accept, Security: co.Security}
		l := &lazySchemas{input: co.Input}
		for _, cp := range co.Params {
			o.Params = append(o.Params, Param{Name: cp.Name, Arg: cp.Arg, In: cp.In, Required: cp.Required,
				Style: cp.Style, Explode: cp.Explode, ContentType: cp.ContentType})
			l.params = append(l.params, ownSchema{raw: cp.Schema, none: cp.NoSchema})
		}
		if cb := co.Body; cb != nil {
			o.Body = &Body{ContentType: cb.ContentType, Required: cb.Required, Encoding: cb.Encoding}
			l.body = ownSchema{raw: cb.Schema, none: cb.NoSchema}
		}
		o.lazy = l
		ops[i] = o
	}
	entities := make([]*Entity, 0, len(in.Entities))
	for _, ce := range in.Entities {
		e := &Entity{Name: ce.Name, Description: ce.Description, Compact: ce.Compact, Annotations: ce.Annotations}
		var err error
		if e.InputSchema, err = decodeSchema(ce.InputSchema); err != nil {
			return nil, errCompiled("undecodable: " + err.Error())
		}
		if e.OutputSchema, err = decodeSchema(ce.OutputSchema); err != nil {
			return nil, errCompiled("undecodable: " + err.Error())
		}
		for _, ca := range ce.Actions {
			a := &Action{Name: ca.Name}
			if ca.Op >= 0 {
				if ca.Op >= len(ops) {
					return nil, errCompiled("an action names no operation")
				}
				a.Op = ops[ca.Op]
			}
			e.Actions = append(e.Actions, a)
		}
		entities = append(entities, e)
	}
	return NewAPI(in.Title, in.Servers, entities, in.Problems), nil
}

// lazySchemas are an operation's encoded schemas, decoded on first use.
type lazySchemas struct {
	once   sync.Once
	err    error
	input  json.RawMessage
	params []ownSchema
	body   ownSchema
}

// ownSchema is a parameter's or body's encoded schema: raw when it is not
// the input schema's property of its argument, none when it has none.
type ownSchema struct {
	raw  json.RawMessage
	none bool
}

// load decodes the operation's schemas when it was loaded from the
// compiled form and they are not yet decoded. Every method that reads
// InputSchema, Params' or Body's Schema calls it first.
func (o *Operation) load() error {
	if o == nil || o.lazy == nil {
		return nil
	}
	l := o.lazy
	l.once.Do(func() {
		l.err = o.decode(l)
		l.input, l.params, l.body = nil, nil, ownSchema{}
	})
	return l.err
}

func (o *Operation) decode(l *lazySchemas) error {
	in, err := decodeSchema(l.input)
	if err != nil {
		return err
	}
	schema := func(s ownSchema, arg string) (*jsonschema.Schema, error) {
		switch {
		case s.none:
			return nil, nil
		case len(s.raw) > 0:
			return decodeSchema(s.raw)
		case in != nil:
			return in.Properties[arg], nil
		}
		return nil, nil
	}
	params := make([]*jsonschema.Schema, len(o.Params))
	for i := range o.Params {
		s, err := schema(l.params[i], o.Params[i].ArgName())
		if err != nil {
			return err
		}
		params[i] = s
	}
	var body *jsonschema.Schema
	if o.Body != nil {
		var err error
		if body, err = schema(l.body, "body"); err != nil {
			return err
		}
	}
	var resolved *jsonschema.Resolved
	if in != nil {
		// As NewAPI does for a fresh registry; a schema that does not
		// resolve was listed in Problems at compile time, and Validate
		// reports it.
		resolved, _ = in.Resolve(nil)
	}
	o.InputSchema, o.resolved = in, resolved
	o.stringsOnly = resolved != nil && stringsOnlySchema(in)
	for i := range o.Params {
		o.Params[i].Schema = params[i]
	}
	if o.Body != nil {
		o.Body.Schema = body
	}
	return nil
}

// errLoad is the error of an operation whose compiled schemas cannot be
// decoded.
func (o *Operation) errLoad(err error) error {
	return switchboard.E(switchboard.ErrInvalid, "invalid_config", "operation %s has an input schema that cannot be used", o.Name).WithCause(err)
}

// Load decodes the operation's schemas when it comes from the compiled
// form (see Compiled) and they are not decoded yet; Validate, Describe and
// BuildRequest call it themselves. Code that reads InputSchema, a Param's
// or the Body's Schema directly calls it first.
func (o *Operation) Load() error {
	if err := o.load(); err != nil {
		return o.errLoad(err)
	}
	return nil
}
