package tenantmcp

import (
	"context"

	"github.com/switchboardhq/switchboard/gateway"
)

// testIndexes are the indexes of the tests' searches, shared as a
// server shares them (one per compiled registry).
var testIndexes = NewIndexes()

// SearchTargets runs the endpoint's search over targets, for an agent
// that read no guide.
func SearchTargets(targets []*gateway.Target, args SearchArgs) (*SearchResult, error) {
	s := &Server{indexes: testIndexes, tokens: newGuideTokens(nil, nil)}
	return s.search(context.Background(), &catalog{targets: targets}, args, readGuides{})
}

// DescribeTarget runs the endpoint's describe over targets.
func DescribeTarget(targets []*gateway.Target, address string) (*Description, error) {
	s := &Server{indexes: testIndexes, tokens: newGuideTokens(nil, nil)}
	return s.describe(&catalog{targets: targets}, DescribeArgs{Address: address})
}
