// Command webdav serves a folder over WebDAV (golang.org/x/net/webdav) on
// a loopback address, for .ci/conformance's knowledge run: every request
// must carry the Authorization value given in $WEBDAV_AUTHORIZATION
// (else 401), as a real WebDAV server asks each reader for theirs.
//
//	webdav -addr 127.0.0.1:PORT -dir FOLDER
package main

import (
	"crypto/subtle"
	"flag"
	"log"
	"net"
	"net/http"
	"os"

	"golang.org/x/net/webdav"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	dir := flag.String("dir", "", "the folder to serve")
	flag.Parse()
	want := os.Getenv("WEBDAV_AUTHORIZATION")
	if *dir == "" || want == "" {
		log.Fatal("webdav: -dir and $WEBDAV_AUTHORIZATION are required")
	}
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Fatalf("webdav: %s is not a loopback address", *addr)
	}
	dav := &webdav.Handler{FileSystem: webdav.Dir(*dir), LockSystem: webdav.NewMemLS()}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="conformance"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		dav.ServeHTTP(w, r)
	})
	log.Fatal(http.ListenAndServe(*addr, h))
}
