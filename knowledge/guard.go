package knowledge

import (
	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/tenants"
)

// Asker is who sends a Resource request: the authenticated principal (nil
// for none), and whether it is a signed-in person (an MCP access token's
// subject) rather than a caller credential.
type Asker struct {
	Principal *auth.Principal
	Person    bool
}

// Decision is the guard's answer for a request that may read: the
// principal the upstream calls are made as, the member that must be
// checked first (a person's own id), and whether a targetUserId the
// asker may not give was dropped (to be audited).
type Decision struct {
	Reader        *auth.Principal
	CheckMember   string
	TargetIgnored bool
}

// Guard decides who reads for a Resource request that asks to act for
// target (its targetUserId, "" for none), on a source whose documents are
// read per reader or with the instance's credential (access). The agent
// allowlist plays no part: nobody in a Resource flow is an agent.
//
//   - no identity: refused (only the profile and the templates are public,
//     and they are served before the guard);
//   - a signed-in person: reads with their own grant, once found a member;
//     a targetUserId is ignored;
//   - a trusted knowledge-sync caller: reads for target (a member, checked
//     by the call), or without one, on a perimeter-only source, with the
//     instance's credential;
//   - anyone else (agent platforms, cron, untrusted callers): refused; a
//     targetUserId they gave is ignored.
func Guard(a Asker, access, target string) (Decision, error) {
	p := a.Principal
	if p == nil {
		return Decision{}, switchboard.E(switchboard.ErrUnauthorized, "unauthorized",
			"reading resources needs a credential; without one only the profile and the templates are readable")
	}
	if a.Person {
		d := Decision{Reader: p, CheckMember: p.UserID, TargetIgnored: target != "" && target != p.UserID}
		return d, nil
	}
	if p.Kind == tenants.KindKnowledgeSync && p.Trusted {
		if target != "" {
			return Decision{Reader: p.WithTarget(target)}, nil
		}
		if access == PerimeterOnly {
			return Decision{Reader: p}, nil
		}
		return Decision{}, switchboard.E(switchboard.ErrInvalid, "user_required",
			"this source is read per reader: name the member to read for in _meta.%s", MetaTargetUser)
	}
	d := Decision{TargetIgnored: target != ""}
	return d, switchboard.E(switchboard.ErrForbidden, "reader_not_allowed",
		"resources are read by members and by trusted knowledge-sync callers only; this caller (%s) is neither", kindOf(p))
}

func kindOf(p *auth.Principal) string {
	if p.Kind == "" {
		return "unknown kind"
	}
	if p.Kind == tenants.KindKnowledgeSync {
		return "an untrusted knowledge-sync caller"
	}
	return p.Kind
}
