package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/openapi"
	"github.com/switchboardhq/switchboard/openapi/fidelity"
	"github.com/switchboardhq/switchboard/registry"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/server"
)

// mcpFidelity runs the whole agent path in process: the description's
// generated package in a one-connector catalog, a server built by
// server.New on an embedded SQLite store in a temporary directory, served on
// loopback, a tenant that installs the connector with its base URL at the
// validating upstream, and an agent (the official MCP SDK client) that
// calls each operation with tools/call.
type mcpFidelity struct {
	cleanup []func()
	sess    *sdk.ClientSession
}

func (m *mcpFidelity) close() {
	for i := len(m.cleanup) - 1; i >= 0; i-- {
		m.cleanup[i]()
	}
}

// sender returns the Sender of the MCP path; the server is started on the
// first call, when the upstream's URL is known.
func (m *mcpFidelity) sender(ctx context.Context, spec []byte, specName string) fidelity.Sender {
	var startErr error
	return func(c fidelity.Call, baseURL string) error {
		if m.sess == nil && startErr == nil {
			startErr = m.start(ctx, spec, specName, baseURL)
		}
		if startErr != nil {
			return startErr
		}
		if c.OwnServer {
			// The gateway would send it to the vendor's own host: never
			// leave loopback.
			return fidelity.ErrSkip
		}
		args := map[string]any{"action": c.Action}
		for k, v := range c.Args {
			args[k] = v
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := m.sess.CallTool(cctx, &sdk.CallToolParams{Name: c.Entity, Arguments: args})
		if err != nil {
			return err
		}
		if res.IsError {
			var b strings.Builder
			for _, ct := range res.Content {
				if tc, ok := ct.(*sdk.TextContent); ok {
					b.WriteString(tc.Text)
				}
			}
			return fmt.Errorf("tool error: %.200s", b.String())
		}
		return nil
	}
}

func (m *mcpFidelity) start(ctx context.Context, spec []byte, specName, upstream string) error {
	pkg, err := openapi.Generate(spec, nil, openapi.GenerateOptions{SpecName: specName})
	if err != nil {
		return err
	}
	var man registry.Manifest
	if err := json.Unmarshal(pkg.Files[openapi.ManifestFile], &man); err != nil {
		return err
	}
	if !strings.HasPrefix(man.BaseURL, "{ENV:") {
		// Server variables inside a host name: no setting aims the
		// instance at the loopback upstream.
		return fmt.Errorf("%w: base URL %s is not one setting", fidelity.ErrSkip, man.BaseURL)
	}
	if len(man.Auth.Modes) == 0 {
		// An instance names one of its connector's auth modes.
		return fmt.Errorf("%w: the connector has no auth mode to install it with", fidelity.ErrSkip)
	}
	dir, err := os.MkdirTemp("", "switchboard-fidelity-")
	if err != nil {
		return err
	}
	m.cleanup = append(m.cleanup, func() { os.RemoveAll(dir) })
	catDir := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(filepath.Join(catDir, man.ID), 0o700); err != nil {
		return err
	}
	for name, b := range pkg.Files {
		if err := os.WriteFile(filepath.Join(catDir, man.ID, name), b, 0o600); err != nil {
			return err
		}
	}
	index := registry.Index{Version: registry.IndexVersion, Connectors: []registry.IndexEntry{{
		ID: man.ID, Name: man.Name, Type: man.Type, Scope: man.Scope, Folder: man.ID,
	}}}
	index.Connectors[0].Auth.Type = man.Auth.Type
	ib, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(catDir, registry.IndexName), ib, 0o600); err != nil {
		return err
	}
	if err := registry.HashCatalog(catDir); err != nil {
		return err
	}
	cat, err := registry.LoadCatalogWith(os.DirFS(catDir), openapi.Compile, registry.LoadOptions{Compiled: &registry.Compiled{}})
	if err != nil {
		return err
	}
	if p := cat.Problems(); len(p) > 0 {
		return fmt.Errorf("catalog problems: %v", p)
	}
	db, err := database.OpenSQLite(ctx, dir+"/"+database.FileName)
	if err != nil {
		return err
	}
	m.cleanup = append(m.cleanup, func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	key := make([]byte, 32)
	rand.Read(key)
	keys, err := secrets.NewKeyring(key)
	if err != nil {
		return err
	}
	var h http.Handler = http.NotFoundHandler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	m.cleanup = append(m.cleanup, hs.Close)
	srv, err := server.New(ctx, server.Config{
		DB: db, ConnectorCatalog: cat, PublicURL: hs.URL, Keyring: keys,
		AllowUpstreams: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	if err != nil {
		return err
	}
	m.cleanup = append(m.cleanup, func() { srv.Close() })
	h = srv.Handler()
	tok, err := fidelity.Install(ctx, srv.Tenants(), "fidelity", man, upstream)
	if err != nil {
		return err
	}
	sess, err := fidelity.Connect(ctx, hs.URL, "fidelity", tok, fidelity.LoopbackClient().Transport)
	if err != nil {
		return err
	}
	m.sess = sess
	m.cleanup = append(m.cleanup, func() { sess.Close() })
	return nil
}
