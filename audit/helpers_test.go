package audit_test

import "github.com/switchboardhq/switchboard"

func switchboardTenant(s string) switchboard.TenantID { return switchboard.TenantID(s) }
