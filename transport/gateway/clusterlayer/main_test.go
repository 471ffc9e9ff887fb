package clusterlayer

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/omniroute/gateway/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.LeakOptions()...) }
