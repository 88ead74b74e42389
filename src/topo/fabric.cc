#include "topo/fabric.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "base/settings.h"

namespace nodus {

const char* fabricKindName(FabricKind k) {
  switch (k) {
    case FabricKind::Flat: return "flat";
    case FabricKind::Torus: return "torus";
    case FabricKind::FatTree: return "fat-tree";
  }
  return "?";
}

uint64_t FabricConfig::capacity() const {
  uint64_t n = 1;
  if (kind == FabricKind::Torus)
    for (int d : dims) n *= static_cast<uint64_t>(d);
  else if (kind == FabricKind::FatTree)
    for (int r : radix) n *= static_cast<uint64_t>(r);
  else
    return UINT64_MAX;
  return n;
}

std::string FabricConfig::describe() const {
  std::ostringstream o;
  o << fabricKindName(kind);
  auto list = [&](const auto& v, const char* sep) {
    for (size_t i = 0; i < v.size(); ++i) o << (i ? sep : "") << v[i];
  };
  if (kind == FabricKind::Torus) {
    o << " ";
    list(dims, "x");
    bool all = true;
    for (bool w : wrap) all &= w;
    if (!all) {
      o << " wrap ";
      for (bool w : wrap) o << (w ? 'y' : 'n');
    }
  } else if (kind == FabricKind::FatTree) {
    o << " radix ";
    list(radix, "x");
    o << " oversubscription ";
    list(oversubscription, ":");
  }
  if (kind != FabricKind::Flat) o << ", links " << link.bandwidthGBs << " GB/s " << link.latencyUs << " us";
  o << " (" << source << ")";
  return o.str();
}

uint64_t FabricConfig::fingerprint() const {
  std::ostringstream o;
  o << static_cast<int>(kind) << '|' << link.bandwidthGBs << '|' << bandwidthGiven << '|' << link.latencyUs << '|';
  for (int d : dims) o << d << ',';
  for (bool w : wrap) o << w << ',';
  for (int r : radix) o << r << ',';
  for (double x : oversubscription) o << x << ',';
  o << static_cast<int>(placement) << '|' << pattern << '|';
  for (const auto& [name, c] : named) o << name << ':' << c[0] << ',' << c[1] << ',' << c[2] << ';';
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : o.str()) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

namespace {

// Errors while reading: thrown inside this file only, turned into a Status
// that names the file, line and field.
struct FabricError {
  int line;  // 1-based, 0 when unknown
  std::string field, what;
};

[[noreturn]] void fail(const YAML::Node& n, const std::string& field, const std::string& what) {
  throw FabricError{n.IsDefined() ? n.Mark().line + 1 : 0, field, what};
}

// "25", "25GB/s", "200Gb/s", "200 Gbit/s", "800MB/s" -> GB/s.
double parseBandwidth(const YAML::Node& n, const std::string& field) {
  const std::string s = n.as<std::string>();
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v > 0) || !std::isfinite(v)) fail(n, field, "expected a positive bandwidth such as 25GB/s");
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  if (unit.empty() || unit == "GB/s") return v;
  if (unit == "Gb/s" || unit == "Gbit/s") return v / 8;
  if (unit == "MB/s") return v / 1000;
  if (unit == "TB/s") return v * 1000;
  fail(n, field, "unknown bandwidth unit '" + unit + "' (GB/s, Gb/s, Gbit/s, MB/s, TB/s)");
}

// "1", "1us", "500ns", "2ms" -> microseconds.
double parseLatency(const YAML::Node& n, const std::string& field) {
  const std::string s = n.as<std::string>();
  char* end = nullptr;
  double v = strtod(s.c_str(), &end);
  if (end == s.c_str() || v < 0 || !std::isfinite(v)) fail(n, field, "expected a latency such as 1us");
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  if (unit.empty() || unit == "us") return v;
  if (unit == "ns") return v / 1000;
  if (unit == "ms") return v * 1000;
  fail(n, field, "unknown latency unit '" + unit + "' (ns, us, ms)");
}

int positiveInt(const YAML::Node& n, const std::string& field) {
  int v = 0;
  try {
    v = n.as<int>();
  } catch (const YAML::Exception&) {
    fail(n, field, "expected a whole number");
  }
  if (v < 1) fail(n, field, "must be at least 1");
  return v;
}

void checkKeys(const YAML::Node& map, const std::string& where, std::initializer_list<const char*> known) {
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* k : known) ok |= key == k;
    if (!ok) {
      std::string list;
      for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
      fail(kv.first, where + key, "unknown field (known: " + list + ")");
    }
  }
}

void parseHosts(const YAML::Node& h, FabricConfig* f) {
  const size_t ncoord = f->kind == FabricKind::Torus ? f->dims.size() : 1;
  if (h.IsScalar()) {
    const std::string s = h.as<std::string>();
    if (s != "in-order" && s != "row-major") fail(h, "hosts", "expected in-order, a list of hosts or {pattern: ...}");
    f->placement = FabricConfig::Placement::InOrder;
    return;
  }
  if (h.IsMap()) {
    checkKeys(h, "hosts.", {"pattern"});
    if (!h["pattern"]) fail(h, "hosts.pattern", "missing");
    f->pattern = h["pattern"].as<std::string>();
    try {
      std::regex re(f->pattern);
      if (re.mark_count() != ncoord)
        fail(h["pattern"], "hosts.pattern",
             "has " + std::to_string(re.mark_count()) + " capture groups; the fabric needs " + std::to_string(ncoord));
    } catch (const std::regex_error& e) {
      fail(h["pattern"], "hosts.pattern", std::string("is not a regular expression: ") + e.what());
    }
    f->placement = FabricConfig::Placement::ByPattern;
    return;
  }
  if (!h.IsSequence()) fail(h, "hosts", "expected in-order, a list of hosts or {pattern: ...}");
  f->placement = FabricConfig::Placement::ByName;
  for (size_t i = 0; i < h.size(); ++i) {
    const YAML::Node e = h[i];
    const std::string at = "hosts[" + std::to_string(i) + "]";
    if (!e.IsMap()) fail(e, at, "expected {name: ..., coord: [...]} (torus) or {name: ..., leaf: N} (fat-tree)");
    if (!e["name"]) fail(e, at + ".name", "missing");
    HostCoord c{0, 0, 0};
    if (f->kind == FabricKind::Torus) {
      checkKeys(e, at + ".", {"name", "coord"});
      const YAML::Node cn = e["coord"];
      if (!cn || !cn.IsSequence() || cn.size() != f->dims.size())
        fail(cn ? cn : e, at + ".coord", "expected " + std::to_string(f->dims.size()) + " coordinates");
      for (size_t d = 0; d < cn.size(); ++d) {
        int v = -1;
        try {
          v = cn[d].as<int>();
        } catch (const YAML::Exception&) {
          fail(cn[d], at + ".coord", "expected whole numbers");
        }
        if (v < 0 || v >= f->dims[d])
          fail(cn[d], at + ".coord", "coordinate " + std::to_string(v) + " is outside 0.." + std::to_string(f->dims[d] - 1));
        c[d] = v;
      }
    } else {
      checkKeys(e, at + ".", {"name", "leaf"});
      if (!e["leaf"]) fail(e, at + ".leaf", "missing");
      int v = -1;
      try {
        v = e["leaf"].as<int>();
      } catch (const YAML::Exception&) {
        fail(e["leaf"], at + ".leaf", "expected a whole number");
      }
      const uint64_t leaves = f->capacity() / static_cast<uint64_t>(f->radix[0]);
      if (v < 0 || static_cast<uint64_t>(v) >= leaves)
        fail(e["leaf"], at + ".leaf", "leaf " + std::to_string(v) + " is outside 0.." + std::to_string(leaves - 1));
      c[0] = v;
    }
    f->named.emplace_back(e["name"].as<std::string>(), c);
  }
  std::set<std::string> names;
  for (size_t i = 0; i < f->named.size(); ++i)
    if (!names.insert(f->named[i].first).second) fail(h[i], "hosts[" + std::to_string(i) + "].name", "host '" + f->named[i].first + "' is listed twice");
  if (f->kind == FabricKind::Torus) {
    std::map<HostCoord, size_t> seen;
    for (size_t i = 0; i < f->named.size(); ++i) {
      auto [it, fresh] = seen.emplace(f->named[i].second, i);
      if (!fresh)
        fail(h[i], "hosts[" + std::to_string(i) + "].coord",
             "the same coordinates as hosts[" + std::to_string(it->second) + "] ('" + f->named[it->second].first + "')");
    }
  } else {
    std::map<int, int> perLeaf;
    for (size_t i = 0; i < f->named.size(); ++i)
      if (++perLeaf[f->named[i].second[0]] > f->radix[0])
        fail(h[i], "hosts[" + std::to_string(i) + "].leaf",
             "leaf " + std::to_string(f->named[i].second[0]) + " has more hosts than its radix " + std::to_string(f->radix[0]));
  }
}

void parseDocument(const YAML::Node& root, FabricConfig* f) {
  if (!root.IsMap()) fail(root, "(top level)", "expected a map of fields (fabric: torus | fat-tree | flat, ...)");
  checkKeys(root, "", {"fabric", "dims", "wrap", "radix", "oversubscription", "link", "hosts"});
  if (!root["fabric"]) fail(root, "fabric", "missing (torus, fat-tree or flat)");
  const std::string kind = root["fabric"].as<std::string>();
  if (kind == "torus") f->kind = FabricKind::Torus;
  else if (kind == "fat-tree" || kind == "fattree") f->kind = FabricKind::FatTree;
  else if (kind == "flat") f->kind = FabricKind::Flat;
  else fail(root["fabric"], "fabric", "unknown fabric '" + kind + "' (torus, fat-tree, flat)");

  auto forbid = [&](const char* key, FabricKind only) {
    if (root[key] && f->kind != only)
      fail(root[key], key, std::string("applies to a ") + fabricKindName(only) + " only");
  };
  forbid("dims", FabricKind::Torus);
  forbid("wrap", FabricKind::Torus);
  forbid("radix", FabricKind::FatTree);
  forbid("oversubscription", FabricKind::FatTree);

  if (f->kind == FabricKind::Torus) {
    const YAML::Node d = root["dims"];
    if (!d) fail(root, "dims", "missing (e.g. dims: [4, 4, 4])");
    if (!d.IsSequence() || d.size() < 1 || d.size() > 3) fail(d, "dims", "expected a list of 1 to 3 sizes");
    for (size_t i = 0; i < d.size(); ++i) f->dims.push_back(positiveInt(d[i], "dims"));
    f->wrap.assign(f->dims.size(), true);
    if (const YAML::Node w = root["wrap"]) {
      if (w.IsScalar()) {
        f->wrap.assign(f->dims.size(), w.as<bool>());
      } else if (w.IsSequence() && w.size() == f->dims.size()) {
        for (size_t i = 0; i < w.size(); ++i) {
          try {
            f->wrap[i] = w[i].as<bool>();
          } catch (const YAML::Exception&) {
            fail(w[i], "wrap", "expected true or false");
          }
        }
      } else {
        fail(w, "wrap", "expected true/false or one per dimension");
      }
    }
  } else if (f->kind == FabricKind::FatTree) {
    const YAML::Node r = root["radix"];
    if (!r) fail(root, "radix", "missing (children per switch per level, e.g. radix: [16, 8])");
    if (!r.IsSequence() || r.size() < 1 || r.size() > 3) fail(r, "radix", "expected a list of 1 to 3 levels");
    for (size_t i = 0; i < r.size(); ++i) f->radix.push_back(positiveInt(r[i], "radix"));
    f->oversubscription.assign(f->radix.size(), 1.0);
    if (const YAML::Node o = root["oversubscription"]) {
      if (!o.IsSequence() || o.size() != f->radix.size()) fail(o, "oversubscription", "expected one ratio per level");
      for (size_t i = 0; i < o.size(); ++i) {
        double v = 0;
        try {
          v = o[i].as<double>();
        } catch (const YAML::Exception&) {
          fail(o[i], "oversubscription", "expected a number such as 4 (for 4:1)");
        }
        if (!(v >= 1) || !std::isfinite(v)) fail(o[i], "oversubscription", "must be at least 1");
        f->oversubscription[i] = v;
      }
    }
  }
  if (const YAML::Node l = root["link"]) {
    if (!l.IsMap()) fail(l, "link", "expected {bandwidth: 25GB/s, latency: 1us}");
    checkKeys(l, "link.", {"bandwidth", "latency"});
    if (l["bandwidth"]) {
      f->link.bandwidthGBs = parseBandwidth(l["bandwidth"], "link.bandwidth");
      f->bandwidthGiven = true;
    }
    if (l["latency"]) f->link.latencyUs = parseLatency(l["latency"], "link.latency");
  }
  if (const YAML::Node h = root["hosts"]) {
    if (f->kind == FabricKind::Flat) fail(h, "hosts", "a flat fabric places no hosts");
    parseHosts(h, f);
  }
}

std::vector<int> parseDimList(const std::string& s, char sep) {
  std::vector<int> v;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) {
    char* end = nullptr;
    long x = strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || x < 1 || x > 1 << 20) return {};
    v.push_back(static_cast<int>(x));
  }
  return v;
}

}  // namespace

Status parseFabric(const std::string& text, const std::string& name, FabricConfig* out) {
  FabricConfig f;
  f.source = name;
  try {
    parseDocument(YAML::Load(text), &f);
  } catch (const FabricError& e) {
    return makeError(nodusInvalidArgument, "%s:%d: field '%s': %s", name.c_str(), e.line, e.field.c_str(), e.what.c_str());
  } catch (const YAML::Exception& e) {
    return makeError(nodusInvalidArgument, "%s:%d: %s", name.c_str(), e.mark.is_null() ? 0 : e.mark.line + 1, e.msg.c_str());
  }
  *out = std::move(f);
  return Status::ok();
}

Status loadFabricFile(const std::string& path, FabricConfig* out) {
  std::ifstream in(path);
  if (!in) return systemError("NODUS_TOPO_FILE: cannot open %s", path.c_str());
  std::stringstream text;
  text << in.rdbuf();
  return parseFabric(text.str(), path, out);
}

Status fabricFromSettings(const Settings& settings, FabricConfig* out) {
  const std::string& file = settings.get(param::kTopoFile);
  if (!file.empty()) return loadFabricFile(file, out);
  FabricConfig f;
  const std::string& torus = settings.get(param::kTorusDims);
  const std::string& fat = settings.get(param::kFatTree);
  if (!torus.empty() && !fat.empty())
    return makeError(nodusInvalidArgument, "NODUS_TORUS_DIMS and NODUS_FATTREE are both set; choose one fabric");
  if (!torus.empty()) {
    f.kind = FabricKind::Torus;
    f.source = "NODUS_TORUS_DIMS";
    f.dims = parseDimList(torus, 'x');
    if (f.dims.empty() || f.dims.size() > 3)
      return makeError(nodusInvalidArgument, "NODUS_TORUS_DIMS=%s: expected 1 to 3 positive sizes such as 4x4x4", torus.c_str());
    f.wrap.assign(f.dims.size(), true);
  } else if (!fat.empty()) {
    f.kind = FabricKind::FatTree;
    f.source = "NODUS_FATTREE";
    const size_t colon = fat.find(':');
    f.radix = parseDimList(fat.substr(0, colon), 'x');
    if (f.radix.empty() || f.radix.size() > 3)
      return makeError(nodusInvalidArgument, "NODUS_FATTREE=%s: expected 1 to 3 switch radixes such as 16x8 (optionally :4x1)", fat.c_str());
    f.oversubscription.assign(f.radix.size(), 1.0);
    if (colon != std::string::npos) {
      std::vector<int> o = parseDimList(fat.substr(colon + 1), 'x');
      if (o.size() != f.radix.size())
        return makeError(nodusInvalidArgument, "NODUS_FATTREE=%s: one oversubscription ratio per level after ':'", fat.c_str());
      for (size_t i = 0; i < o.size(); ++i) f.oversubscription[i] = o[i];
    }
  }
  *out = std::move(f);
  return Status::ok();
}

Status placeHosts(const FabricConfig& f, const std::vector<std::string>& hosts, std::vector<HostCoord>* coords) {
  coords->assign(hosts.size(), HostCoord{0, 0, 0});
  if (f.kind == FabricKind::Flat) return Status::ok();
  if (hosts.size() > f.capacity())
    return makeError(nodusInvalidUsage, "%s: %zu hosts do not fit a fabric with room for %llu", f.source.c_str(),
                     hosts.size(), static_cast<unsigned long long>(f.capacity()));
  auto fromIndex = [&](uint64_t i) {
    HostCoord c{0, 0, 0};
    if (f.kind == FabricKind::Torus) {
      for (size_t d = 0; d < f.dims.size(); ++d) {
        c[d] = static_cast<int>(i % static_cast<uint64_t>(f.dims[d]));
        i /= static_cast<uint64_t>(f.dims[d]);
      }
    } else {
      c[0] = static_cast<int>(i / static_cast<uint64_t>(f.radix[0]));
    }
    return c;
  };
  switch (f.placement) {
    case FabricConfig::Placement::InOrder:
      for (size_t i = 0; i < hosts.size(); ++i) (*coords)[i] = fromIndex(i);
      return Status::ok();
    case FabricConfig::Placement::ByName: {
      std::map<std::string, HostCoord> at(f.named.begin(), f.named.end());
      for (size_t i = 0; i < hosts.size(); ++i) {
        auto it = at.find(hosts[i]);
        if (it == at.end())
          return makeError(nodusInvalidUsage, "%s: field 'hosts': host '%s' is not listed", f.source.c_str(), hosts[i].c_str());
        (*coords)[i] = it->second;
      }
      return Status::ok();
    }
    case FabricConfig::Placement::ByPattern: {
      const std::regex re(f.pattern);
      std::map<HostCoord, size_t> seen;
      std::map<int, int> perLeaf;
      for (size_t i = 0; i < hosts.size(); ++i) {
        std::smatch m;
        if (!std::regex_match(hosts[i], m, re))
          return makeError(nodusInvalidUsage, "%s: field 'hosts.pattern': host '%s' does not match '%s'", f.source.c_str(),
                           hosts[i].c_str(), f.pattern.c_str());
        HostCoord c{0, 0, 0};
        for (size_t g = 1; g < m.size(); ++g) {
          const int v = atoi(m[g].str().c_str());
          const int limit = f.kind == FabricKind::Torus ? f.dims[g - 1]
                                                        : static_cast<int>(f.capacity() / static_cast<uint64_t>(f.radix[0]));
          if (v < 0 || v >= limit)
            return makeError(nodusInvalidUsage, "%s: field 'hosts.pattern': host '%s' gives coordinate %d outside 0..%d",
                             f.source.c_str(), hosts[i].c_str(), v, limit - 1);
          c[g - 1] = v;
        }
        if (f.kind == FabricKind::Torus) {
          auto [it, fresh] = seen.emplace(c, i);
          if (!fresh)
            return makeError(nodusInvalidUsage, "%s: field 'hosts.pattern': hosts '%s' and '%s' get the same coordinates",
                             f.source.c_str(), hosts[it->second].c_str(), hosts[i].c_str());
        } else if (++perLeaf[c[0]] > f.radix[0]) {
          return makeError(nodusInvalidUsage, "%s: field 'hosts.pattern': leaf %d gets more hosts than its radix %d",
                           f.source.c_str(), c[0], f.radix[0]);
        }
        (*coords)[i] = c;
      }
      return Status::ok();
    }
  }
  return Status::ok();
}

}  // namespace nodus
