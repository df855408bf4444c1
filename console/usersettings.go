package console

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/switchboardhq/switchboard/audit"
	"github.com/switchboardhq/switchboard/secrets"
	"github.com/switchboardhq/switchboard/tenants"
)

// settingsData is the viewer's own settings page of an instance: the
// values of its user-scope fields, which only the viewer sets and sees
// (secret ones never shown, not even to them). Admins get the same page
// for their own values: no page shows anyone else's.
type settingsData struct {
	Slug     string
	Settings *tenants.UserSettingsView
	CSRF     string
	Saved    bool
	Problem  *errorData
}

func (d settingsData) title() string { return "Your settings for " + d.Slug }

// settingsPage shows the viewer's own settings of the instance.
func (c *Console) settingsPage(ec echo.Context, v *Viewer) error {
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	slug := ec.Param("instance")
	st, err := c.cfg.Tenants.UserSettings(ec.Request().Context(), t.Slug, slug, v.Session.UserID)
	if err != nil {
		return err
	}
	c.render(ec, http.StatusOK, "instance-settings", v, settingsData{Slug: slug, Settings: st, CSRF: v.CSRF, Saved: ec.QueryParam("done") == "saved"})
	return nil
}

// saveSettings sets the viewer's own values from the form: a field left
// empty keeps its value, a ticked "clear" box clears it.
func (c *Console) saveSettings(ec echo.Context, v *Viewer) error {
	if err := checkForm(ec, v); err != nil {
		return err
	}
	t, err := c.tenantOf(ec, v)
	if err != nil {
		return err
	}
	ctx := ec.Request().Context()
	slug := ec.Param("instance")
	st, err := c.cfg.Tenants.UserSettings(ctx, t.Slug, slug, v.Session.UserID)
	if err != nil {
		return err
	}
	form := ec.Request().PostForm
	values := map[string]*secrets.Secret{}
	for _, f := range st.Fields {
		if form.Get("clear_"+f.Name) != "" {
			values[f.Name] = nil
			continue
		}
		if val := form.Get("field_" + f.Name); val != "" {
			s := secrets.New(val)
			values[f.Name] = &s
		}
	}
	if _, err := c.cfg.Tenants.SetUserSettings(ctx, t.Slug, slug, v.Session.UserID, values); err != nil {
		c.render(ec, problemData(err).Status, "instance-settings", v, settingsData{Slug: slug, Settings: st, CSRF: v.CSRF, Problem: c.problem(ec, err)})
		return nil
	}
	if c.cfg.AuditLog != nil {
		c.cfg.AuditLog.Record(audit.Entry{Tenant: t.ID, Instance: slug, Actor: v.Session.UserID, Subject: v.Session.UserID,
			Tool: "admin", Action: "settings.set", Outcome: "ok"})
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"instances/"+slug+"/settings?done=saved")
}
