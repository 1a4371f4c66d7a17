// SPDX-License-Identifier: GPL-2.0-or-later
// The server side of vfio-user (QEMU docs/interop/vfio-user.rst) for one
// PCI function: the protocol, the function's config space, the guest
// memory QEMU maps for DMA and the MSI-X eventfds.  What the function
// does is a Backend's.
//
// Every message is hostile input: its size is checked before any field is
// read, it is at most kMaxMsg bytes, and the socket is read without ever
// blocking (a message that arrives in pieces waits in a buffer).  Replies
// go out through a bounded buffer; a client that stops reading them, sends
// a malformed message or goes away ends the session (serve() false).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace vfu {

constexpr uint32_t kMaxMsg = 1u << 20;		// a message, header included
constexpr unsigned int kMaxFds = 16;		// per message
constexpr size_t kMaxDmaMaps = 1024;
constexpr size_t kMaxOutBytes = 4u << 20;	// replies not yet read
constexpr unsigned int kNumBars = 6;
constexpr uint32_t kConfigSize = 256;

// The commands, flags and message bodies of the protocol.
enum Command : uint16_t {
	kVersion = 1,
	kDmaMap = 2,
	kDmaUnmap = 3,
	kDeviceGetInfo = 4,
	kRegionInfo = 5,
	kRegionIoFds = 6,
	kIrqInfo = 7,
	kSetIrqs = 8,
	kRegionRead = 9,
	kRegionWrite = 10,
	kDmaRead = 11,
	kDmaWrite = 12,
	kDeviceReset = 13,
	kDirtyPages = 14,
	kRegionWriteMulti = 15,
};
constexpr uint32_t kFlagReply = 0x1;
constexpr uint32_t kFlagTypeMask = 0xf;
constexpr uint32_t kFlagNoReply = 0x10;
constexpr uint32_t kFlagError = 0x20;

struct Hdr {
	uint16_t id;
	uint16_t command;
	uint32_t size;
	uint32_t flags;
	uint32_t error_reply;
};
static_assert(sizeof(Hdr) == 16);

struct RegionRw {
	uint64_t offset;
	uint32_t region;
	uint32_t count;
};
static_assert(sizeof(RegionRw) == 16);

struct DmaMap {
	uint32_t argsz;
	uint32_t flags;
	uint64_t offset;
	uint64_t iova;
	uint64_t size;
};
static_assert(sizeof(DmaMap) == 32);

struct DmaUnmap {
	uint32_t argsz;
	uint32_t flags;
	uint64_t iova;
	uint64_t size;
};
static_assert(sizeof(DmaUnmap) == 24);

// What the server asks of the function behind it.  Called from serve()
// only, never re-entered.
class Backend {
public:
	virtual ~Backend() = default;
	// A BAR access the server has checked against the BAR's size; size
	// is 1, 2, 4 or 8.
	virtual uint64_t bar_read(unsigned int bar, uint64_t off, unsigned int size) = 0;
	virtual void bar_write(unsigned int bar, uint64_t off, uint64_t v,
			       unsigned int size) = 0;
	// VFIO_USER_DEVICE_RESET.
	virtual void reset() = 0;
};

// The PCI function's identity and layout.
struct Function {
	uint16_t vendor = 0, device = 0, subsys_vendor = 0, subsys = 0;
	uint8_t revision = 0;
	uint32_t class_code = 0;		// base, sub, prog-if: 0xBBSSPP
	std::array<uint64_t, kNumBars> bar_size{};	// 0: none; 64-bit memory BARs
	unsigned int msix_bar = 0;
	unsigned int msix_vectors = 0;		// table at 0, PBA at bar_size / 2
};

// Guest memory QEMU shared with DMA_MAP, mapped here.
class DmaSpace {
public:
	DmaSpace() = default;
	~DmaSpace();
	DmaSpace(const DmaSpace &) = delete;
	DmaSpace &operator=(const DmaSpace &) = delete;
	// Map [iova, iova + size) of fd at offset; false if refused: not
	// page-aligned, overlapping, past the file's end, too many, or fd
	// not a memfd sealed against shrinking.
	bool map(int fd, uint64_t offset, uint64_t iova, uint64_t size, bool writable);
	// Unmap every mapping inside [iova, iova + size); false if the range
	// cuts one.
	bool unmap(uint64_t iova, uint64_t size);
	void clear();
	// Copy between the guest and buf; false when any byte is not in a
	// mapping (or, for a write, in a writable one): nothing partial is
	// left to trust, the caller reports a DMA error.
	bool read(uint64_t iova, void *buf, size_t len) const;
	bool write(uint64_t iova, const void *buf, size_t len);
	[[nodiscard]] size_t size() const { return maps_.size(); }

private:
	struct Map {
		uint64_t iova, size;
		uint8_t *host;
		bool writable;
	};
	// The mapping holding iova, or nullptr.
	[[nodiscard]] const Map *find(uint64_t iova) const;
	std::vector<Map> maps_;		// sorted by iova, never overlapping
};

class Server {
public:
	Server(int fd, const Function &fn, Backend &be);
	~Server();
	Server(const Server &) = delete;
	Server &operator=(const Server &) = delete;

	// Read what the socket has and handle every complete message; never
	// blocks.  false: the session is over (why() says why).
	bool serve();
	// Push queued replies out; false: the client is gone.
	bool flush();
	[[nodiscard]] bool want_write() const { return !out_.empty(); }
	[[nodiscard]] const std::string &why() const { return why_; }
	// Set once when QEMU's guest memory cannot all be mapped (a note for
	// the log: DMA to that memory will fail); take_map_note() clears it.
	std::string take_map_note() { return std::exchange(why_map_, {}); }

	// Signal an MSI-X vector; false when QEMU gave it no eventfd.
	bool signal(unsigned int vector);
	// Bus master enable, as the guest last wrote the command register.
	[[nodiscard]] bool bus_master() const;
	DmaSpace &dma() { return dma_; }

	// Handle one whole message (for the fuzzer and the unit tests: no
	// socket needed); replies go to the output buffer.
	bool handle(const Hdr &h, std::span<const uint8_t> body, std::vector<int> &fds);
	// The replies not yet sent (tests).
	[[nodiscard]] const std::vector<uint8_t> &pending_out() const { return out_; }

private:
	bool fail(const std::string &why);
	void reply(const Hdr &req, const void *body, size_t len);
	void reply2(const Hdr &req, const void *a, size_t alen, const void *b, size_t blen);
	void error(const Hdr &req, int err);
	bool region_read(const Hdr &h, std::span<const uint8_t> b);
	bool region_write(const Hdr &h, std::span<const uint8_t> b);
	bool set_irqs(const Hdr &h, std::span<const uint8_t> b, std::vector<int> &fds);
	bool dma_map(const Hdr &h, std::span<const uint8_t> b, std::vector<int> &fds);
	bool dma_unmap(const Hdr &h, std::span<const uint8_t> b);
	void config_write(uint32_t off, const uint8_t *data, uint32_t len);
	void build_config();
	void close_irqs();

	int fd_;
	Function fn_;
	Backend &be_;
	std::array<uint8_t, kConfigSize> cfg_{};
	std::array<uint8_t, kConfigSize> cfg_wmask_{};
	std::vector<int> irq_fd_;
	DmaSpace dma_;
	// Input: the header being read, then its body; fds that came with it.
	std::vector<uint8_t> in_;
	size_t in_want_ = sizeof(Hdr);
	bool in_body_ = false;
	std::vector<int> in_fds_;
	std::vector<uint8_t> out_;
	bool versioned_ = false;
	bool map_refused_ = false, map_unbacked_ = false;
	std::string why_, why_map_;
};

} // namespace vfu
