package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the read at start", func() {
	for _, name := range []string{"sqlite", "postgres"} {
		It("begins when the manager is elected, before any session needs it, and not in a manager that is not elected, with the "+name+" log store", func() {
			be := backends[name]
			ns := newNamespace(true) // no session: no reconcile asks for the read
			id := "planmode-" + ns
			m1 := startManager(ns, be.mgrStore, managerOptions{leaderElectionID: id})
			m2 := startManager(ns, be.mgrStore, managerOptions{leaderElectionID: id})
			var leader, follower *testManager
			Eventually(func() bool {
				switch {
				case m1.elected():
					leader, follower = m1, m2
				case m2.elected():
					leader, follower = m2, m1
				}
				return leader != nil
			}, timeout, interval).Should(BeTrue())
			Eventually(leader.store.listings.Load, timeout, interval).Should(Equal(int64(1)), "the leader reads the store once as it starts")
			Consistently(follower.store.listings.Load, quiet, interval).Should(BeZero(), "a manager that is not elected reads nothing")
			Expect(leader.store.listings.Load()).To(Equal(int64(1)), "and only once")
		})
	}
})
