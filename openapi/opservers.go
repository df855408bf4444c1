package openapi

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/switchboardhq/switchboard/registry"
)

// operationServers returns the absolute servers that operations (or their
// path items) name instead of the description's own, each once, by the
// URL an operation's Server holds (its variables at their defaults), in
// path order.
func operationServers(doc *openapi3.T) ([]string, map[string]*openapi3.Server) {
	var docFirst string
	if s := serverURLs(doc.Servers); len(s) > 0 {
		docFirst = s[0]
	}
	byURL := map[string]*openapi3.Server{}
	var order []string
	if doc.Paths == nil {
		return nil, nil
	}
	paths := doc.Paths.Map()
	for _, p := range sortedKeys(paths) {
		item := paths[p]
		if item == nil {
			continue
		}
		ops := item.Operations()
		for _, m := range sortedKeys(ops) {
			op := ops[m]
			if op == nil {
				continue
			}
			var list openapi3.Servers
			if op.Servers != nil && len(*op.Servers) > 0 {
				list = *op.Servers
			} else {
				list = item.Servers
			}
			var first *openapi3.Server
			for _, s := range list {
				if s != nil && s.URL != "" {
					first = s
					break
				}
			}
			if first == nil {
				continue
			}
			u := serverURLs(openapi3.Servers{first})[0]
			if u == docFirst || !strings.HasPrefix(u, "http") {
				continue
			}
			if _, seen := byURL[u]; !seen {
				byURL[u] = first
				order = append(order, u)
			}
		}
	}
	return order, byURL
}

var serverVar = regexp.MustCompile(`\{[^{}]*\}`)

// serverLabel names a server by its host: its first label that is not a
// variable or "www", or its first two when the first is the main
// server's ("api" of api.example.com and api.eu.example.com).
func serverLabel(raw, main string) string {
	labels := hostLabels(raw)
	if len(labels) == 0 {
		return "SERVER"
	}
	name := labels[0]
	if m := hostLabels(main); len(m) > 0 && m[0] == name && len(labels) > 1 {
		name += "_" + labels[1]
	}
	return strings.ToUpper(snake(name, 30))
}

// hostLabels are the labels of a server URL's host, without variables,
// "www" and the port.
func hostLabels(raw string) []string {
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		raw = rest
	}
	host, _, _ := strings.Cut(raw, "/")
	host, _, _ = strings.Cut(host, ":")
	var out []string
	for _, l := range strings.Split(host, ".") {
		if l = serverVar.ReplaceAllString(l, ""); l != "" && l != "www" {
			out = append(out, l)
		}
	}
	return out
}

// operationServerFields returns the fields and the manifest's Servers for
// the operation-level servers: each server gets a URL field whose default
// is the description's URL, so that an instance can send those calls to a
// proxy, a regional endpoint or a test double; each of its variables
// (region, subdomain) gets a field of its own, named in the URL field's
// default. A variable field of the same name and default as one already
// declared (taken) is shared.
func operationServerFields(doc *openapi3.T, prefix string, taken []registry.Field) ([]registry.Field, map[string]string) {
	order, byURL := operationServers(doc)
	if len(order) == 0 {
		return nil, nil
	}
	main := ""
	if s := serverURLs(doc.Servers); len(s) > 0 {
		main = s[0]
	}
	declared := map[string]registry.Field{}
	for _, f := range taken {
		declared[f.Name] = f
	}
	var fields []registry.Field
	unique := func(name string) string {
		n := name
		for i := 2; ; i++ {
			if _, ok := declared[n]; !ok {
				return n
			}
			n = fmt.Sprintf("%s_%d", name, i)
		}
	}
	servers := map[string]string{}
	for _, u := range order {
		srv := byURL[u]
		label := serverLabel(srv.URL, main)
		tmpl := srv.URL
		for _, name := range sortedKeys(srv.Variables) {
			v := srv.Variables[name]
			if v == nil {
				continue
			}
			fn := prefix + "_" + strings.ToUpper(snake(name, 40))
			if f, ok := declared[fn]; !ok || f.Default != v.Default || f.Secret {
				if ok {
					fn = unique(prefix + "_" + label + "_" + strings.ToUpper(snake(name, 40)))
				}
				f := variableField(fn, name, v, srv.URL)
				declared[fn] = f
				fields = append(fields, f)
			}
			tmpl = strings.ReplaceAll(tmpl, "{"+name+"}", "{ENV:"+fn+"}")
		}
		fn := unique(prefix + "_" + label + "_URL")
		f := registry.Field{Name: fn, Label: "URL of " + truncate(srv.URL, 80), Default: tmpl, Example: u,
			Description: truncate("Where the operations served at "+srv.URL+" are sent. Keep the default unless you use a proxy, a regional endpoint or a test double.", 500)}
		declared[fn] = f
		fields = append(fields, f)
		servers[u] = "{ENV:" + fn + "}"
	}
	return fields, servers
}
