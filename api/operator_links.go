package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard"
	"github.com/switchboardhq/switchboard/members"
	"github.com/switchboardhq/switchboard/signin"
)

// operatorLinkRequest is the body of POST /v1/operator-sign-in-links.
type operatorLinkRequest struct {
	// LifetimeSeconds is how long the link stays usable; 0 is 15 minutes.
	LifetimeSeconds int64 `json:"lifetime_seconds"`
}

// createdOperatorLink is the answer: the link's record and its URL, shown
// once (only the link token's hash is stored).
type createdOperatorLink struct {
	members.OperatorLink
	URL string `json:"url"`
}

// createOperatorLink mints a single-use operator sign-in link: opening its
// URL in a browser and confirming signs the operator in to the console.
// The operator token never becomes a cookie itself.
func (s *Server) createOperatorLink(c echo.Context) error {
	if s.cfg.Members == nil {
		return errNoMembers
	}
	var req operatorLinkRequest
	if c.Request().ContentLength != 0 { // no body: the defaults
		if err := decode(c, &req); err != nil {
			return err
		}
	}
	if req.LifetimeSeconds < 0 || req.LifetimeSeconds > int64(members.MaxOperatorLinkLifetime/time.Second) {
		return switchboard.E(switchboard.ErrInvalid, "invalid_lifetime", "lifetime_seconds is between 1 and %d (0: 15 minutes)",
			int64(members.MaxOperatorLinkLifetime/time.Second))
	}
	actor := members.ActorOperator
	if p := principalOf(c); p != nil && p.Actor != "" {
		actor = p.Actor
	}
	l, token, err := s.cfg.Members.CreateOperatorLink(c.Request().Context(), actor, time.Duration(req.LifetimeSeconds)*time.Second)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, createdOperatorLink{OperatorLink: l, URL: signin.LinkURL(s.cfg.PublicURL, token.Reveal())})
}
