package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/database"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

const adminLinkUsage = `usage: switchboard admin invite --tenant SLUG --email ADDRESS --role owner|admin|member [--lifetime 24h]
       switchboard admin login-link --tenant SLUG --email ADDRESS [--lifetime 24h]
       switchboard admin login-link --operator [--lifetime 15m]

invite mints a single-use invitation: opening its link within its lifetime
makes the person a member of the tenant with the role and signs them in.
login-link mints a single-use sign-in link for an existing member. Either
link is printed once on stdout; only its hash is stored. Links are built on
--public-url.

login-link --operator mints the platform operator's sign-in link to the web
console (single use, 15 minutes unless --lifetime says otherwise, at most 1h):
open it in a browser and confirm to start an operator session. Whoever can
run this command against the store is the operator.
`

// runAdminLink runs "switchboard admin invite" and "switchboard admin
// login-link" on the store directly.
func runAdminLink(ctx context.Context, sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var tenant, email, role *string
	var lifetime *time.Duration
	operator := new(bool)
	extra := func(fs *flag.FlagSet) {
		tenant = fs.String("tenant", "", "the tenant's slug (required)")
		email = fs.String("email", "", "the person's email address (required)")
		if sub == "invite" {
			role = fs.String("role", "", "owner, admin or member (required)")
		} else {
			operator = fs.Bool("operator", false, "the platform operator's console sign-in link (no --tenant or --email)")
		}
		lifetime = fs.Duration("lifetime", 0, "how long the link stays usable (default 24h; 15m with --operator)")
	}
	cfg, pos, err := parseCommand("admin "+sub, args, getenv, stderr, "\n"+adminLinkUsage, extra)
	if err != nil {
		return err
	}
	if *operator {
		if len(pos) != 0 || *tenant != "" || *email != "" {
			fmt.Fprint(stderr, adminLinkUsage)
			return errors.New("admin login-link --operator: takes no --tenant, --email or arguments")
		}
		return runOperatorLink(ctx, cfg, *lifetime, stdout, stderr)
	}
	if len(pos) != 0 || *tenant == "" || *email == "" || (role != nil && *role == "") {
		fmt.Fprint(stderr, adminLinkUsage)
		return fmt.Errorf("admin %s: --tenant and --email are required (and --role for invite), and no arguments", sub)
	}
	if *lifetime < 0 {
		return errors.New("--lifetime must be positive")
	}
	store, db, done, err := openMembers(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	t, err := tenants.NewStore(db, nil).Tenant(ctx, *tenant)
	if err != nil {
		return err
	}
	var (
		inv   members.Invitation
		token secrets.Secret
	)
	if sub == "invite" {
		var r members.Role
		if r, err = members.ParseRole(*role); err != nil {
			return err
		}
		inv, token, err = store.Invite(ctx, members.ActorOperator, t.ID, *email, r, *lifetime)
	} else {
		inv, token, err = store.LoginLink(ctx, members.ActorOperator, t.ID, *email, *lifetime)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s link for %s in %s, usable once until %s; it is shown once:\n",
		inv.Kind, inv.Email, t.Slug, inv.ExpiresAt.Format(time.RFC3339))
	fmt.Fprintln(stdout, signin.LinkURL(cfg.PublicURL, token.Reveal()))
	return nil
}

// openMembers opens the store and the members store over it, auditing
// through a writer that done closes (writing the audit rows of what was
// done before the command returns), and then closes the store.
func openMembers(ctx context.Context, cfg *config, stderr io.Writer) (*members.Store, *database.DB, func(), error) {
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	rec, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Logger: logger})
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return members.NewStore(db, rec, members.Options{}), db, func() {
		rec.Close(context.WithoutCancel(ctx))
		db.Close()
	}, nil
}

// runOperatorLink runs "switchboard admin login-link --operator": the
// operator's single-use console sign-in link, printed once.
func runOperatorLink(ctx context.Context, cfg *config, lifetime time.Duration, stdout, stderr io.Writer) error {
	store, _, done, err := openMembers(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	l, token, err := store.CreateOperatorLink(ctx, members.ActorOperator, lifetime)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "operator sign-in link, usable once until %s; it is shown once:\n", l.ExpiresAt.Format(time.RFC3339))
	fmt.Fprintln(stdout, signin.LinkURL(cfg.PublicURL, token.Reveal()))
	return nil
}
