// A real browser draws a picture remat wrote: headless chromium takes a screenshot
// of the budget -> overhead curve (<remat/io/svg.hpp>), and the PNG, decoded here with zlib, must
// show it: the size asked for, the title's text drawn, and ink where the SVG says each point is.
// No chromium (PATH, or REMAT_CHROMIUM): "SKIP" and exit 77, which CTest reports as skipped
// (tests/CMakeLists.txt, label browser). chromium runs under `timeout`, so a browser that hangs
// fails the test instead of holding CI.

#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <remat/io/svg.hpp>
#include <remat/sweep.hpp>

#include "support/random_chain.hpp"
#include "support/xml_check.hpp"

namespace {

constexpr int width = 960, height = 560;
constexpr int skip = 77;

int failed(const std::string& why) {
  std::fprintf(stderr, "FAIL: %s\n", why.c_str());
  return 1;
}

/// The browser: $REMAT_CHROMIUM, else chromium, chromium-browser or google-chrome on PATH.
std::string find_chromium() {
  if (const char* e = std::getenv("REMAT_CHROMIUM"); e && *e) return access(e, X_OK) == 0 ? e : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::vector<std::string> where;
  for (std::string d; std::getline(dirs, d, ':');) where.push_back(d.empty() ? "." : d);
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    for (const auto& d : where) {
      const std::string f = d + "/" + name;
      if (access(f.c_str(), X_OK) == 0) return f;
    }
  return "";
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (const char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// An 8-bit RGB or RGBA PNG, not interlaced (what chromium writes), as RGB rows.
struct image {
  int w = 0, h = 0;
  std::vector<std::array<std::uint8_t, 3>> px;
  [[nodiscard]] const std::array<std::uint8_t, 3>& at(int x, int y) const {
    return px[static_cast<std::size_t>(y) * static_cast<std::size_t>(w) +
              static_cast<std::size_t>(x)];
  }
};

std::uint32_t be32(const std::string& s, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

/// Decodes a PNG; an empty image and `why` on anything else.
image decode_png(const std::string& f, std::string& why) {
  image img;
  if (f.size() < 8 || f.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    why = "not a PNG file";
    return {};
  }
  int depth = 0, color = 0, interlace = 0;
  std::string idat;
  for (std::size_t at = 8; at + 12 <= f.size();) {
    const std::uint32_t len = be32(f, at);
    const std::string type = f.substr(at + 4, 4);
    if (at + 12 + len > f.size()) break;
    if (type == "IHDR" && len >= 13) {
      img.w = static_cast<int>(be32(f, at + 8));
      img.h = static_cast<int>(be32(f, at + 12));
      depth = static_cast<unsigned char>(f[at + 16]);
      color = static_cast<unsigned char>(f[at + 17]);
      interlace = static_cast<unsigned char>(f[at + 20]);
    } else if (type == "IDAT") {
      idat += f.substr(at + 8, len);
    }
    at += 12 + len;
  }
  if (depth != 8 || (color != 2 && color != 6) || interlace != 0 || img.w <= 0 || img.h <= 0) {
    why = "a PNG this test does not decode (bit depth " + std::to_string(depth) + ", colour type " +
          std::to_string(color) + ", interlace " + std::to_string(interlace) + ")";
    return {};
  }
  const std::size_t bpp = color == 6 ? 4 : 3;
  const std::size_t stride = static_cast<std::size_t>(img.w) * bpp;
  std::vector<std::uint8_t> raw((stride + 1) * static_cast<std::size_t>(img.h));
  uLongf size = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &size, reinterpret_cast<const Bytef*>(idat.data()),
                 static_cast<uLong>(idat.size())) != Z_OK ||
      size != raw.size()) {
    why = "the PNG's image data does not inflate to its size";
    return {};
  }
  // Undo the row filters (the PNG specification's filter types): None, Sub, Up, Average, Paeth.
  std::vector<std::uint8_t> out(stride * static_cast<std::size_t>(img.h));
  for (std::size_t y = 0; y < static_cast<std::size_t>(img.h); ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* row = &out[y * stride];
    const std::uint8_t* up = y > 0 ? &out[(y - 1) * stride] : nullptr;
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= bpp ? row[x - bpp] : 0, b = up ? up[x] : 0,
                c = up && x >= bpp ? up[x - bpp] : 0;
      int pred = 0;
      switch (filter) {
        case 0:
          pred = 0;
          break;
        case 1:
          pred = a;
          break;
        case 2:
          pred = b;
          break;
        case 3:
          pred = (a + b) / 2;
          break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default:
          why = "an unknown PNG row filter";
          return {};
      }
      row[x] = static_cast<std::uint8_t>((in[x] + pred) & 0xFF);
    }
  }
  img.px.resize(static_cast<std::size_t>(img.w) * static_cast<std::size_t>(img.h));
  for (std::size_t i = 0; i < img.px.size(); ++i)
    img.px[i] = {out[i * bpp], out[i * bpp + 1], out[i * bpp + 2]};
  return img;
}

bool ink(const std::array<std::uint8_t, 3>& p) { return p[0] < 200 || p[1] < 200 || p[2] < 200; }

}  // namespace

int main() {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    std::printf(
        "SKIP: no chromium on PATH (Debian: apt-get install chromium; or set REMAT_CHROMIUM)\n");
    return skip;
  }
  // The picture: a sweep of a small random chain, every policy.
  remat::testing::chain_generator gen(2026);
  const remat::chain c =
      gen({.min_length = 6, .max_length = 6, .p_zero_size = 0, .p_zero_time = 0}, "browser check");
  const auto sw = remat::sweep(c, {.budgets = 8, .hw = remat::machine::with_bandwidth(1e6)});
  if (!sw) return failed(sw.message());
  const std::string svg = remat::io::overhead_curve_svg(*sw);

  const auto dir =
      std::filesystem::temp_directory_path() /
      ("remat_browser_" + std::to_string(getpid()) + "_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "curve.svg", shot = dir / "shot.png", log = dir / "chromium.log";
  if (!remat::io::write_text_file(file, svg)) return failed("cannot write " + file.string());
  const std::string cmd =
      "timeout 90 " + quote(chromium) +
      " --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run"
      " --disable-dev-shm-usage --user-data-dir=" +
      quote((dir / "profile").string()) + " --screenshot=" + quote(shot.string()) +
      " --window-size=" + std::to_string(width) + "," + std::to_string(height) + " " +
      quote("file://" + file.string()) + " >" + quote(log.string()) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string png = slurp(shot), messages = slurp(log);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (rc != 0 || png.empty())
    return failed("chromium (" + chromium + ") gave no screenshot (exit status " +
                  std::to_string(rc) + "); its output:\n" +
                  messages.substr(messages.size() > 4000 ? messages.size() - 4000 : 0));

  std::string why;
  const image img = decode_png(png, why);
  if (img.px.empty()) return failed(why);
  if (img.w != width || img.h != height)
    return failed("the screenshot is " + std::to_string(img.w) + "x" + std::to_string(img.h) +
                  ", not " + std::to_string(width) + "x" + std::to_string(height));
  // Not blank: ink, in several colours (the series), on a white page.
  std::size_t inked = 0;
  std::set<std::uint32_t> colours;
  for (const auto& p : img.px) {
    inked += ink(p);
    colours.insert(static_cast<std::uint32_t>(p[0]) << 16 | static_cast<std::uint32_t>(p[1]) << 8 |
                   p[2]);
  }
  const double share = static_cast<double>(inked) / static_cast<double>(img.px.size());
  std::printf("screenshot %dx%d: %.1f%% ink, %zu colours\n", img.w, img.h, 100 * share,
              colours.size());
  if (share < 0.01 || share > 0.6)
    return failed("the screenshot is blank or filled: " + std::to_string(share));
  if (colours.size() < 8)
    return failed("the screenshot has " + std::to_string(colours.size()) + " colours");
  // The title's text is drawn (dark pixels in its band).
  std::size_t title = 0;
  for (int y = 8; y < 30; ++y)
    for (int x = 0; x < img.w; ++x)
      title += img.at(x, y)[0] < 100 && img.at(x, y)[1] < 100 && img.at(x, y)[2] < 100;
  if (title < 100)
    return failed("no title text drawn (" + std::to_string(title) + " dark pixels at the top)");
  // Ink where the SVG puts each point (within 4 pixels).
  const auto doc = remat::testing::parse_xml(svg);
  if (!doc.error.empty()) return failed("the SVG is not well-formed: " + doc.error);
  const auto points = doc.root->all("g", "point");
  std::size_t seen = 0;
  for (const auto* g : points) {
    const std::string& t = *g->attribute("transform");  // translate(x,y)
    const auto comma = t.find(',');
    const int px = static_cast<int>(std::strtod(t.c_str() + 10, nullptr) + 0.5);
    const int py = static_cast<int>(std::strtod(t.c_str() + comma + 1, nullptr) + 0.5);
    bool found = false;
    for (int dy = -4; dy <= 4 && !found; ++dy)
      for (int dx = -4; dx <= 4 && !found; ++dx) {
        const int x = px + dx, y = py + dy;
        found = x >= 0 && y >= 0 && x < img.w && y < img.h && ink(img.at(x, y));
      }
    seen += found;
  }
  std::printf("%zu of %zu points drawn where the SVG puts them\n", seen, points.size());
  if (points.empty() || seen != points.size()) return failed("points missing from the screenshot");
  std::printf("PASS\n");
  return 0;
}
