// Zip central directory parsing (stored entries only carry usable data).
#include "io/zip_archive.h"

#include <fmt/format.h>

#include <cstring>

namespace pagoda {

namespace {

constexpr uint32_t kEocdSig = 0x06054b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kZip64EocdSig = 0x06064b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr size_t kEocdBytes = 22;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kZip64EocdBytes = 56;
constexpr size_t kCentralBytes = 46;
constexpr size_t kLocalBytes = 30;
constexpr size_t kMaxComment = 0xFFFF;

// Little-endian reads; callers check bounds first.
uint16_t u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t u64(const uint8_t* p) {
  return u32(p) | (static_cast<uint64_t>(u32(p + 4)) << 32);
}

// True when [begin, begin + len) lies inside a buffer of `size` bytes.
bool inside(uint64_t begin, uint64_t len, size_t size) {
  return begin <= size && len <= size - begin;
}

struct Directory {
  uint64_t num_entries = 0;
  uint64_t offset = 0;  // of the first central header
  uint64_t bytes = 0;
};

Result<Directory> find_directory(const uint8_t* data, size_t size, const std::string& name) {
  if (size < kEocdBytes) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{}: {} bytes is too short for a zip archive", name, size));
  }
  // The record is the last 22 bytes plus a comment of up to 64 KiB.
  const size_t lowest = size - kEocdBytes > kMaxComment ? size - kEocdBytes - kMaxComment : 0;
  size_t at = size - kEocdBytes;
  while (u32(data + at) != kEocdSig || at + kEocdBytes + u16(data + at + 20) != size) {
    if (at == lowest) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: no zip end-of-central-directory record (truncated, or "
                                    "not a zip archive)",
                                    name));
    }
    --at;
  }
  const uint8_t* e = data + at;
  if (u16(e + 4) != 0 || u16(e + 6) != 0) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: multi-disk zip archives are not supported", name));
  }
  Directory d{u16(e + 10), u32(e + 16), u32(e + 12)};
  const bool overflows = d.num_entries == 0xFFFF || d.offset == 0xFFFFFFFF || d.bytes == 0xFFFFFFFF;
  if (overflows && at >= kZip64LocatorBytes &&
      u32(data + at - kZip64LocatorBytes) == kZip64LocatorSig) {
    const uint64_t z = u64(data + at - kZip64LocatorBytes + 8);
    if (!inside(z, kZip64EocdBytes, size) || u32(data + z) != kZip64EocdSig) {
      return make_error(
          ErrorCode::kCorrupt,
          fmt::format("{}: zip64 end-of-central-directory record at {} is invalid", name, z));
    }
    d = Directory{u64(data + z + 32), u64(data + z + 48), u64(data + z + 40)};
  }
  if (!inside(d.offset, d.bytes, size)) {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{}: zip central directory [{}, +{}) lies outside the {} bytes "
                                  "of the file (truncated?)",
                                  name, d.offset, d.bytes, size));
  }
  return d;
}

// The zip64 extra field (id 1) replaces, in this order, those of
// uncompressed size, compressed size and local offset that read 0xFFFFFFFF.
Status apply_zip64_extra(const uint8_t* extra, size_t len, uint64_t* uncompressed,
                         uint64_t* compressed, uint64_t* local, const std::string& where) {
  size_t at = 0;
  while (at + 4 <= len) {
    const uint16_t id = u16(extra + at);
    const uint16_t n = u16(extra + at + 2);
    if (at + 4 + n > len) break;
    if (id == 1) {
      const uint8_t* p = extra + at + 4;
      size_t used = 0;
      for (uint64_t* field : {uncompressed, compressed, local}) {
        if (*field != 0xFFFFFFFF) continue;
        if (used + 8 > n) {
          return make_error(ErrorCode::kCorrupt, fmt::format("{}: short zip64 extra field", where));
        }
        *field = u64(p + used);
        used += 8;
      }
      return Status::Ok();
    }
    at += 4 + n;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<ZipEntry>> parse_zip_archive(const uint8_t* data, size_t size,
                                                const std::string& name) {
  PAGODA_ASSIGN_OR_RETURN(Directory dir, find_directory(data, size, name));
  std::vector<ZipEntry> entries;
  uint64_t at = dir.offset;
  const uint64_t end = dir.offset + dir.bytes;
  for (uint64_t i = 0; i < dir.num_entries; ++i) {
    if (!inside(at, kCentralBytes, end) || u32(data + at) != kCentralSig) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: zip central header {} at {} is invalid", name, i, at));
    }
    const uint8_t* c = data + at;
    const uint16_t flags = u16(c + 8);
    const size_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    if (!inside(at + kCentralBytes, name_len + extra_len + comment_len, end)) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: zip central header {} runs past the directory", name, i));
    }
    ZipEntry e;
    e.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), name_len);
    e.method = u16(c + 10);
    e.stored = e.method == 0;
    uint64_t compressed = u32(c + 20), uncompressed = u32(c + 24), local = u32(c + 42);
    const std::string where = fmt::format("{}: zip entry '{}'", name, e.name);
    PAGODA_RETURN_IF_ERROR(apply_zip64_extra(c + kCentralBytes + name_len, extra_len, &uncompressed,
                                             &compressed, &local, where));
    if (flags & 1) {
      return make_error(ErrorCode::kUnsupported, where + " is encrypted");
    }
    if (e.stored && compressed != uncompressed) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{} is stored but its sizes differ ({} and {})", where,
                                    compressed, uncompressed));
    }
    if (!inside(local, kLocalBytes, size) || u32(data + local) != kLocalSig) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: its local header at {} is invalid", where, local));
    }
    e.data_begin = local + kLocalBytes + u16(data + local + 26) + u16(data + local + 28);
    e.size = compressed;
    if (!inside(e.data_begin, e.size, size)) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("{}: its {} bytes at {} lie outside the {} bytes of the file "
                                    "(truncated?)",
                                    where, e.size, e.data_begin, size));
    }
    entries.push_back(std::move(e));
    at += kCentralBytes + name_len + extra_len + comment_len;
  }
  return entries;
}

}  // namespace pagoda
