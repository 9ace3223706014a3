package launch

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// Stat summarises one metric over a cell's repeats.
type Stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Q1     float64 `json:"q1"` // quartiles, linear interpolation between order statistics
	Q3     float64 `json:"q3"`
	// CILo and CIHi bound a distribution-free confidence interval of the
	// median: order statistics chosen from the binomial distribution
	// (no assumption about the shape of the noise). CILevel is its exact
	// coverage: the smallest that is at least 95%, or, for too few runs to
	// reach 95% (5 runs give 93.75%), that of [min, max].
	CILo    float64 `json:"ci_lo"`
	CIHi    float64 `json:"ci_hi"`
	CILevel float64 `json:"ci_level"`
}

// ComputeStat summarises samples; nil for none.
func ComputeStat(samples []float64) *Stat {
	if len(samples) == 0 {
		return nil
	}
	x := slices.Clone(samples)
	slices.Sort(x)
	n := len(x)
	st := &Stat{N: n, Median: quantile(x, 0.5), Min: x[0], Max: x[n-1], Q1: quantile(x, 0.25), Q3: quantile(x, 0.75)}
	k, level := medianCIRank(n)
	st.CILo, st.CIHi, st.CILevel = x[k-1], x[n-k], level
	return st
}

// quantile of sorted x at q (R's type 7).
func quantile(x []float64, q float64) float64 {
	if len(x) == 1 {
		return x[0]
	}
	h := q * float64(len(x)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(x) {
		return x[len(x)-1]
	}
	return x[lo] + (h-float64(lo))*(x[lo+1]-x[lo])
}

// medianCIRank returns k such that [x(k), x(n-k+1)] (1-based order
// statistics) covers the median with probability at least 95% (the
// largest such k), and that coverage; k is 1 when even [min, max] covers
// less.
func medianCIRank(n int) (int, float64) {
	// P(Binomial(n, 1/2) <= j) for j = 0..n
	cdf := make([]float64, n+1)
	p := math.Pow(0.5, float64(n))
	c := 1.0
	acc := 0.0
	for j := 0; j <= n; j++ {
		if j > 0 {
			c = c * float64(n-j+1) / float64(j)
		}
		acc += c * p
		cdf[j] = acc
	}
	best, level := 1, 1-2*cdf[0]
	for k := 1; 2*k <= n; k++ {
		cov := 1 - 2*cdf[k-1] // P(x(k) <= median <= x(n-k+1))
		if cov >= 0.95 {
			best, level = k, cov
		}
	}
	if n == 1 {
		return 1, 0
	}
	return best, level
}

// MannWhitney returns the two-sided p-value of the Mann-Whitney U test
// (Wilcoxon rank-sum) that a and b come from the same distribution: exact
// for small samples without ties, else the normal approximation with tie
// and continuity corrections.
func MannWhitney(a, b []float64) float64 {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return math.NaN()
	}
	type obs struct {
		v float64
		g int
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range a {
		all = append(all, obs{v, 0})
	}
	for _, v := range b {
		all = append(all, obs{v, 1})
	}
	slices.SortFunc(all, func(x, y obs) int {
		switch {
		case x.v < y.v:
			return -1
		case x.v > y.v:
			return 1
		}
		return 0
	})
	ranks := make([]float64, len(all))
	ties := false
	tieTerm := 0.0
	for i := 0; i < len(all); {
		j := i
		for j+1 < len(all) && all[j+1].v == all[i].v {
			j++
		}
		r := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			ranks[k] = r
		}
		if t := float64(j - i + 1); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		i = j + 1
	}
	r1 := 0.0
	for i, o := range all {
		if o.g == 0 {
			r1 += ranks[i]
		}
	}
	u := r1 - float64(n1*(n1+1))/2
	if !ties && n1 <= 25 && n2 <= 25 {
		return exactMWp(n1, n2, u)
	}
	mu := float64(n1*n2) / 2
	nn := float64(n1 + n2)
	sigma := math.Sqrt(float64(n1*n2) / 12 * ((nn + 1) - tieTerm/(nn*(nn-1))))
	if sigma == 0 {
		return 1
	}
	z := (math.Abs(u-mu) - 0.5) / sigma
	if z < 0 {
		z = 0
	}
	return math.Min(1, math.Erfc(z/math.Sqrt2))
}

// exactMWp is the exact two-sided p-value of U = u for samples of n1 and
// n2 without ties: the number of arrangements with U <= u (or >= u),
// counted by the usual recurrence.
func exactMWp(n1, n2 int, u float64) float64 {
	maxU := n1 * n2
	// f[i][j][k]: arrangements of i and j with U = k; built row by row.
	prev := make([][]float64, n2+1)
	for j := range prev {
		prev[j] = make([]float64, maxU+1)
		prev[j][0] = 1 // i = 0
	}
	for i := 1; i <= n1; i++ {
		cur := make([][]float64, n2+1)
		for j := 0; j <= n2; j++ {
			cur[j] = make([]float64, maxU+1)
			for k := 0; k <= maxU; k++ {
				// the largest value is from the first sample (adds j to U) or the second
				v := 0.0
				if k-j >= 0 {
					v += prev[j][k-j]
				}
				if j > 0 {
					v += cur[j-1][k]
				}
				cur[j][k] = v
			}
		}
		prev = cur
	}
	dist := prev[n2]
	total := 0.0
	for _, c := range dist {
		total += c
	}
	lo, hi := 0.0, 0.0
	for k, c := range dist {
		if float64(k) <= u+1e-9 {
			lo += c
		}
		if float64(k) >= u-1e-9 {
			hi += c
		}
	}
	return math.Min(1, 2*math.Min(lo, hi)/total)
}

// bootstrapRounds is how many resamples BootstrapRatio draws.
const bootstrapRounds = 4000

// BootstrapRatio returns the percentile bootstrap 95% interval of
// median(b)/median(a), from bootstrapRounds resamples drawn with a seed
// derived from seed: the same samples give the same interval.
func BootstrapRatio(a, b []float64, seed string) (lo, hi float64) {
	h := fnv.New64a()
	h.Write([]byte(seed))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	ratios := make([]float64, 0, bootstrapRounds)
	ca, cb := make([]int, len(sa)), make([]int, len(sb))
	for range bootstrapRounds {
		ma := resampleMedian(sa, ca, rng)
		if ma == 0 {
			continue
		}
		ratios = append(ratios, resampleMedian(sb, cb, rng)/ma)
	}
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(ratios)
	return quantile(ratios, 0.025), quantile(ratios, 0.975)
}

// resampleMedian draws len(sorted) values with replacement and returns
// their median. The draw is kept as counts per position of the sorted
// sample, so the order statistics are read off without sorting.
func resampleMedian(sorted []float64, counts []int, rng *rand.Rand) float64 {
	n := len(sorted)
	clear(counts)
	for range n {
		counts[rng.IntN(n)]++
	}
	lo, hi := (n-1)/2, n/2 // 0-based ranks of the middle value(s)
	var vlo, vhi float64
	seen := 0
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if seen <= lo && lo < seen+c {
			vlo = sorted[i]
		}
		if seen <= hi && hi < seen+c {
			vhi = sorted[i]
			break
		}
		seen += c
	}
	return (vlo + vhi) / 2
}
