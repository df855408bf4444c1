package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard/auth"
	"github.com/switchboardhq/switchboard/secrets"
)

// OperatorTokenRequest is the body of POST /v1/operator-tokens.
type OperatorTokenRequest struct {
	// Name says what the token is for.
	Name string `json:"name"`
}

// CreatedOperatorToken answers POST /v1/operator-tokens: the token's
// record and, this once, the token itself.
type CreatedOperatorToken struct {
	auth.OperatorToken
	Token string `json:"token"`
}

func (s *Server) createOperatorToken(c echo.Context) error {
	var req OperatorTokenRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	token, rec, err := s.CreateOperatorToken(c.Request().Context(), actorOf(c), req.Name)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, CreatedOperatorToken{OperatorToken: rec, Token: token.Reveal()})
}

func (s *Server) listOperatorTokens(c echo.Context) error {
	q, err := pageQuery(c)
	if err != nil {
		return err
	}
	list, next, err := s.cfg.Operators.Page(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return listPage(c, map[string]any{"operator_tokens": list}, next)
}

func (s *Server) revokeOperatorToken(c echo.Context) error {
	rec, err := s.RevokeOperatorToken(c.Request().Context(), actorOf(c), c.Param("token"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec)
}

// CreateOperatorToken mints an operator token as POST
// /v1/operator-tokens does, and records it (its id, never the token) in
// the operator's audit log (no tenant) with actor.
func (s *Server) CreateOperatorToken(ctx context.Context, actor, name string) (secrets.Secret, auth.OperatorToken, error) {
	token, rec, err := s.cfg.Operators.Create(ctx, name)
	if err != nil {
		return token, rec, err
	}
	s.recordAs(actor, "", "", rec.ID, "operator_token.create")
	return token, rec, nil
}

// RevokeOperatorToken revokes an operator token as DELETE
// /v1/operator-tokens/{token} does, and records it with actor.
func (s *Server) RevokeOperatorToken(ctx context.Context, actor, id string) (auth.OperatorToken, error) {
	rec, err := s.cfg.Operators.Revoke(ctx, id)
	if err != nil {
		return rec, err
	}
	s.recordAs(actor, "", "", rec.ID, "operator_token.revoke")
	return rec, nil
}
