package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Spool is the on-disk part of the audit backlog: rows the store did not
// take, kept until it does. Each spill is one append-only segment file of
// JSON lines, written to a temporary name, fsync'd and renamed, so a crash
// leaves a segment whole or absent. A segment's name carries its creation
// time, the writing process and its row count, so that segments sort
// oldest first and the backlog is counted without reading them; replicas
// sharing a directory never write the same name. Rows carry their IDs and
// the store ignores a row it already has, so a segment replayed twice
// (a crash after the insert, or two replicas draining one directory)
// writes each row once.
type Spool struct {
	dir  string
	seq  atomic.Int64
	mu   sync.Mutex // serialises appends and removals of this process
	rows atomic.Int64
}

// segment is one spool file.
type segment struct {
	name string
	rows int64
}

const segmentExt = ".jsonl"

// OpenSpool opens (creating it, private to the server's user) the spool
// directory dir, removes temporary files a crash left behind and counts
// the rows waiting.
func OpenSpool(dir string) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the audit spool directory: %w", err)
	}
	s := &Spool{dir: dir}
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	for _, t := range tmps {
		_ = os.Remove(t)
	}
	if _, err := s.segments(); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir is the spool's directory.
func (s *Spool) Dir() string { return s.dir }

// Rows is how many rows wait in the spool, as of the last append, removal
// or listing.
func (s *Spool) Rows() int64 { return s.rows.Load() }

// Append writes entries as one new segment and syncs it to disk before it
// returns.
func (s *Spool) Append(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := fmt.Sprintf("%020d-%d-%d-%d%s", time.Now().UnixNano(), os.Getpid(), s.seq.Add(1), len(entries), segmentExt)
	tmp := filepath.Join(s.dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("creating an audit spool segment: %w", err)
	}
	bw := bufio.NewWriter(f)
	enc := json.NewEncoder(bw)
	for i := range entries {
		if err = enc.Encode(&entries[i]); err != nil {
			break
		}
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing an audit spool segment: %w", err)
	}
	syncDir(s.dir)
	s.rows.Add(int64(len(entries)))
	return nil
}

// segments lists the spool's segments, oldest first, and recounts its
// rows (another replica may have drained some).
func (s *Spool) segments() ([]segment, error) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("listing the audit spool: %w", err)
	}
	var out []segment
	var total int64
	for _, de := range des {
		name := de.Name()
		if de.IsDir() || !strings.HasSuffix(name, segmentExt) {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(name, segmentExt), "-")
		rows, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
		if err != nil || len(parts) != 4 {
			continue
		}
		out = append(out, segment{name: name, rows: rows})
		total += rows
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	s.rows.Store(total)
	return out, nil
}

// read returns a segment's rows. A segment another replica removed reads
// as empty.
func (s *Spool) read(seg segment) ([]Entry, error) {
	f, err := os.Open(filepath.Join(s.dir, seg.name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening audit spool segment %s: %w", seg.name, err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	out := make([]Entry, 0, seg.rows)
	for dec.More() {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("reading audit spool segment %s: %w", seg.name, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// remove deletes a segment whose rows are in the store (or given up).
func (s *Spool) remove(seg segment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := os.Remove(filepath.Join(s.dir, seg.name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing audit spool segment %s: %w", seg.name, err)
	}
	if err == nil {
		s.rows.Add(-seg.rows)
		syncDir(s.dir)
	}
	return nil
}

// quarantine renames a segment that cannot be read, so that it no longer
// blocks the drain and stays for the operator to inspect.
func (s *Spool) quarantine(seg segment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Rename(filepath.Join(s.dir, seg.name), filepath.Join(s.dir, seg.name+".bad")); err != nil {
		return fmt.Errorf("setting aside audit spool segment %s: %w", seg.name, err)
	}
	s.rows.Add(-seg.rows)
	return nil
}

// syncDir makes a created, renamed or removed name durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
