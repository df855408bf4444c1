package tenantmcp

import "github.com/switchboardhq/switchboard/gateway"

// SearchTargets runs the endpoint's search over targets, for an agent
// that read no guide.
func SearchTargets(targets []*gateway.Target, args SearchArgs) (*SearchResult, error) {
	s := &Server{indexes: NewIndexes(), tokens: newGuideTokens(nil, nil)}
	return s.search(&catalog{targets: targets}, args, readGuides{})
}

// DescribeTarget runs the endpoint's describe over targets.
func DescribeTarget(targets []*gateway.Target, address string) (*Description, error) {
	s := &Server{indexes: NewIndexes(), tokens: newGuideTokens(nil, nil)}
	return s.describe(&catalog{targets: targets}, DescribeArgs{Address: address})
}
