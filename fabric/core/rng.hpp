// SPDX-License-Identifier: GPL-2.0-or-later
// A small seeded generator (xoshiro256**, seeded by splitmix64) whose
// sequence is the same on every platform and library, so a run repeats.
#pragma once

#include <cstdint>

namespace vrnic::fabric {

class Rng {
public:
	explicit Rng(uint64_t seed = 1) { reseed(seed); }

	void reseed(uint64_t seed)
	{
		for (auto &w : s_) {
			seed += 0x9e3779b97f4a7c15ULL;
			uint64_t z = seed;
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
			w = z ^ (z >> 31);
		}
	}

	uint64_t next()
	{
		const uint64_t result = rotl(s_[1] * 5, 7) * 9;
		const uint64_t t = s_[1] << 17;
		s_[2] ^= s_[0];
		s_[3] ^= s_[1];
		s_[1] ^= s_[2];
		s_[0] ^= s_[3];
		s_[2] ^= t;
		s_[3] = rotl(s_[3], 45);
		return result;
	}

	// Uniform in [0, 1).
	double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

	// True with probability p (never for p <= 0, always for p >= 1).
	bool chance(double p)
	{
		if (p <= 0.0)
			return false;
		return p >= 1.0 || uniform() < p;
	}

	// Uniform in [0, n] (inclusive).
	uint64_t upto(uint64_t n)
	{
		return n == 0 ? 0 : next() % (n + 1);
	}

private:
	static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
	uint64_t s_[4]{};
};

} // namespace vrnic::fabric
