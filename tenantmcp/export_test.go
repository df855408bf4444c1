package tenantmcp

import "github.com/switchboardhq/switchboard/gateway"

// SearchTargets runs the endpoint's search over targets, for an agent
// that read no guide.
func SearchTargets(targets []*gateway.Target, args SearchArgs) (*SearchResult, error) {
	s := &Server{indexes: NewIndexes(), tokens: newGuideTokens(nil, nil)}
	return s.search(&catalog{targets: targets}, args, readGuides{})
}
