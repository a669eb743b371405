package bytesize_test

import (
	"fmt"

	"github.com/psiflow/psiflow/internal/bytesize"
)

func Example() {
	for _, s := range []string{"64KiB", "1.5G", "1PiB", "256 m", "1e3"} {
		b, err := bytesize.Parse(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(b, bytesize.Format(b), bytesize.Human(b))
	}
	// Output:
	// 65536 64KiB 64 KiB
	// 1610612736 1536MiB 1.5 GiB
	// 1125899906842624 1PiB 1 PiB
	// 268435456 256MiB 256 MiB
	// size "1e3": want a non-negative number with an optional binary unit (B, K, M, G, T, P, E; KiB … EiB)
}
