#pragma once
// A strict reader of the XML that remat writes (the SVG pictures, <remat/io/svg.hpp>): it checks
// that a document is well-formed XML 1.0 (one root element, tags nested and closed by their
// name, attributes quoted and not repeated, no '<' in attribute values, only the five predefined
// entities and character references, no raw '&' or '<' in text, no stray text outside the root,
// no control characters) and gives back the element tree, so that a test can read what was
// drawn. No DTDs, CDATA or processing instructions but the XML declaration: remat writes none.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace remat::testing {

struct xml_element {
  std::string name;
  std::map<std::string, std::string> attributes;  ///< values with their entities decoded
  std::vector<std::unique_ptr<xml_element>> children;
  std::string text;  ///< the character data directly inside, decoded

  [[nodiscard]] const std::string* attribute(const std::string& key) const {
    const auto it = attributes.find(key);
    return it == attributes.end() ? nullptr : &it->second;
  }
  /// Every element below (not this one) whose name is `tag` and, when given, whose attribute
  /// class is `cls`, in document order.
  void find_all(std::string_view tag, std::string_view cls,
                std::vector<const xml_element*>& out) const {
    for (const auto& c : children) {
      const std::string* k = c->attribute("class");
      if (c->name == tag && (cls.empty() || (k && *k == cls))) out.push_back(c.get());
      c->find_all(tag, cls, out);
    }
  }
  [[nodiscard]] std::vector<const xml_element*> all(std::string_view tag,
                                                    std::string_view cls = {}) const {
    std::vector<const xml_element*> out;
    find_all(tag, cls, out);
    return out;
  }
};

/// The parsed document, or the first error with its byte offset.
struct xml_document {
  std::unique_ptr<xml_element> root;
  std::string error;  ///< empty when well-formed
};

namespace detail {
class xml_reader {
 public:
  explicit xml_reader(std::string_view s) : s_(s) {}

  xml_document read() {
    xml_document doc;
    if (s_.substr(0, 5) == "<?xml") {
      const auto end = s_.find("?>");
      if (end == std::string_view::npos) return fail("unterminated XML declaration");
      i_ = end + 2;
    }
    skip_misc();
    if (i_ >= s_.size() || s_[i_] != '<') return fail("no root element");
    auto root = element();
    if (!err_.empty()) return fail(err_);
    skip_misc();
    if (i_ != s_.size()) return fail("content after the root element");
    doc.root = std::move(root);
    return doc;
  }

 private:
  xml_document fail(const std::string& why) {
    xml_document d;
    d.error = why + " (at byte " + std::to_string(i_) + ")";
    return d;
  }
  static bool name_char(char c, bool first) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || u >= 0x80)
      return true;
    return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
  }
  static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  void skip_space() {
    while (i_ < s_.size() && space(s_[i_])) ++i_;
  }
  /// Whitespace and comments between the declaration, the root and the end.
  void skip_misc() {
    for (;;) {
      skip_space();
      if (s_.substr(i_, 4) != "<!--") return;
      const auto end = s_.find("-->", i_ + 4);
      if (end == std::string_view::npos) {
        err_ = "unterminated comment";
        i_ = s_.size();
        return;
      }
      i_ = end + 3;
    }
  }
  std::optional<std::string> name() {
    const std::size_t start = i_;
    if (i_ >= s_.size() || !name_char(s_[i_], true)) return std::nullopt;
    while (i_ < s_.size() && name_char(s_[i_], false)) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }
  /// Decodes character data up to `stop` (exclusive), checking entities and characters.
  bool decode(std::string_view raw, std::string& out, bool attribute) {
    for (std::size_t k = 0; k < raw.size(); ++k) {
      const char c = raw[k];
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') return bad("a control character");
      if (c == '<') return bad(attribute ? "'<' in an attribute value" : "'<' in text");
      if (c != '&') {
        out += c;
        continue;
      }
      const auto semi = raw.find(';', k);
      if (semi == std::string_view::npos) return bad("'&' that starts no entity");
      const std::string_view ent = raw.substr(k + 1, semi - k - 1);
      if (ent == "amp")
        out += '&';
      else if (ent == "lt")
        out += '<';
      else if (ent == "gt")
        out += '>';
      else if (ent == "quot")
        out += '"';
      else if (ent == "apos")
        out += '\'';
      else if (ent.size() > 1 && ent[0] == '#') {
        const bool hex = ent[1] == 'x';
        const std::string_view digits = ent.substr(hex ? 2 : 1);
        if (digits.empty()) return bad("an empty character reference");
        std::uint32_t cp = 0;
        for (const char d : digits) {
          int v = -1;
          if (d >= '0' && d <= '9')
            v = d - '0';
          else if (hex && d >= 'a' && d <= 'f')
            v = d - 'a' + 10;
          else if (hex && d >= 'A' && d <= 'F')
            v = d - 'A' + 10;
          if (v < 0) return bad("a malformed character reference");
          cp = cp * (hex ? 16u : 10u) + static_cast<std::uint32_t>(v);
          if (cp > 0x10FFFF) return bad("a character reference beyond Unicode");
        }
        if (cp < 0x20 && cp != 0x9 && cp != 0xA && cp != 0xD)
          return bad("a reference to a control character");
        append_utf8(out, cp);
      } else {
        return bad("an unknown entity '&" + std::string(ent) + ";'");
      }
      k = semi;
    }
    return true;
  }
  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool bad(const std::string& why) {
    if (err_.empty()) err_ = why;
    return false;
  }

  /// An element at '<' (its start tag, content and end tag).
  std::unique_ptr<xml_element> element() {
    auto e = std::make_unique<xml_element>();
    ++i_;  // '<'
    auto n = name();
    if (!n) return bad("a tag without a name"), nullptr;
    e->name = *n;
    for (;;) {
      const bool spaced = i_ < s_.size() && space(s_[i_]);
      skip_space();
      if (i_ >= s_.size()) return bad("an unterminated start tag <" + e->name), nullptr;
      if (s_.substr(i_, 2) == "/>") {
        i_ += 2;
        return e;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      if (!spaced) return bad("attributes of <" + e->name + "> not separated by space"), nullptr;
      auto key = name();
      if (!key) return bad("a malformed attribute in <" + e->name + ">"), nullptr;
      skip_space();
      if (i_ >= s_.size() || s_[i_] != '=')
        return bad("attribute " + *key + " without '='"), nullptr;
      ++i_;
      skip_space();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\''))
        return bad("attribute " + *key + " not quoted"), nullptr;
      const char q = s_[i_++];
      const auto end = s_.find(q, i_);
      if (end == std::string_view::npos) return bad("an unterminated attribute " + *key), nullptr;
      std::string value;
      if (!decode(s_.substr(i_, end - i_), value, true)) return nullptr;
      i_ = end + 1;
      if (!e->attributes.emplace(*key, std::move(value)).second)
        return bad("attribute " + *key + " repeated in <" + e->name + ">"), nullptr;
    }
    // Content: text, comments, child elements, up to </name>.
    for (;;) {
      const auto lt = s_.find('<', i_);
      if (lt == std::string_view::npos) return bad("<" + e->name + "> is never closed"), nullptr;
      if (!decode(s_.substr(i_, lt - i_), e->text, false)) return nullptr;
      i_ = lt;
      if (s_.substr(i_, 4) == "<!--") {
        const auto end = s_.find("-->", i_ + 4);
        if (end == std::string_view::npos) return bad("an unterminated comment"), nullptr;
        i_ = end + 3;
      } else if (s_.substr(i_, 2) == "</") {
        i_ += 2;
        auto n2 = name();
        if (!n2 || *n2 != e->name)
          return bad("</" + n2.value_or("") + "> closes <" + e->name + ">"), nullptr;
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '>')
          return bad("a malformed end tag </" + e->name), nullptr;
        ++i_;
        return e;
      } else if (s_.substr(i_, 2) == "<!" || s_.substr(i_, 2) == "<?") {
        return bad("a declaration or processing instruction inside the document"), nullptr;
      } else {
        auto child = element();
        if (!child) return nullptr;
        e->children.push_back(std::move(child));
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::string err_;
};
}  // namespace detail

/// Parses s as XML (header comment); doc.error says why it is not well-formed.
inline xml_document parse_xml(std::string_view s) { return detail::xml_reader(s).read(); }

}  // namespace remat::testing
