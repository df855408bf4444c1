package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard/auth"
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
	token, rec, err := s.cfg.Operators.Create(c.Request().Context(), req.Name)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, CreatedOperatorToken{OperatorToken: rec, Token: token.Reveal()})
}

func (s *Server) listOperatorTokens(c echo.Context) error {
	list, err := s.cfg.Operators.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"operator_tokens": list})
}

func (s *Server) revokeOperatorToken(c echo.Context) error {
	rec, err := s.cfg.Operators.Revoke(c.Request().Context(), c.Param("token"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rec)
}
