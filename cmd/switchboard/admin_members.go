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
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/signin"
	"github.com/switchboardhq/switchboard/tenants"
)

const adminLinkUsage = `usage: switchboard admin invite --tenant SLUG --email ADDRESS --role owner|admin|member [--lifetime 24h]
       switchboard admin login-link --tenant SLUG --email ADDRESS [--lifetime 24h]

invite mints a single-use invitation: opening its link within its lifetime
makes the person a member of the tenant with the role and signs them in.
login-link mints a single-use sign-in link for an existing member. Either
link is printed once on stdout; only its hash is stored. Links are built on
--public-url.
`

// runAdminLink runs "switchboard admin invite" and "switchboard admin
// login-link" on the store directly.
func runAdminLink(ctx context.Context, sub string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var tenant, email, role *string
	var lifetime *time.Duration
	extra := func(fs *flag.FlagSet) {
		tenant = fs.String("tenant", "", "the tenant's slug (required)")
		email = fs.String("email", "", "the person's email address (required)")
		if sub == "invite" {
			role = fs.String("role", "", "owner, admin or member (required)")
		}
		lifetime = fs.Duration("lifetime", members.DefaultInvitationLifetime, "how long the link stays usable")
	}
	cfg, pos, err := parseCommand("admin "+sub, args, getenv, stderr, "\n"+adminLinkUsage, extra)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *tenant == "" || *email == "" || (role != nil && *role == "") {
		fmt.Fprint(stderr, adminLinkUsage)
		return fmt.Errorf("admin %s: --tenant and --email are required (and --role for invite), and no arguments", sub)
	}
	if *lifetime <= 0 {
		return errors.New("--lifetime must be positive")
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.Close()
	t, err := tenants.NewStore(db, nil).Tenant(ctx, *tenant)
	if err != nil {
		return err
	}
	rec, err := audit.NewWriter(audit.NewStore(db), audit.WriterOptions{Logger: logger})
	if err != nil {
		return err
	}
	// Close writes the audit rows of what was done before the command
	// returns.
	defer rec.Close(context.WithoutCancel(ctx))
	store := members.NewStore(db, rec, members.Options{})
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
