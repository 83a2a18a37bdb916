package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The same helper from a ginkgo suite: MustStart(GinkgoT()) logs the version to GinkgoWriter
// and stops the server through DeferCleanup semantics (GinkgoT().Cleanup).
func TestFromGinkgo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "pgtest from ginkgo")
}

var _ = Describe("pgtest in a ginkgo suite", Ordered, func() {
	var s *Server
	It("starts a server with MustStart(GinkgoT())", func() {
		s = MustStart(GinkgoT())
		Expect(s.Version).To(HavePrefix("PostgreSQL "))
		conn, err := pgx.Connect(context.Background(), s.URL)
		Expect(err).NotTo(HaveOccurred())
		var one int
		Expect(conn.QueryRow(context.Background(), "SELECT 1").Scan(&one)).To(Succeed())
		Expect(one).To(Equal(1))
		Expect(conn.Close(context.Background())).To(Succeed())
	})
	It("removed the server directory when the previous spec ended", func() {
		Expect(s).NotTo(BeNil())
		_, err := os.Stat(s.Dir)
		Expect(os.IsNotExist(err)).To(BeTrue(), "directory %s still exists", s.Dir)
	})
})
