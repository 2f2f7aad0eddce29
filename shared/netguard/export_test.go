package netguard

import "context"

// Control exposes the connect-time socket check to the tests.
func (g *Guard) Control(network, address string) error {
	return g.control(context.Background(), network, address, nil)
}
