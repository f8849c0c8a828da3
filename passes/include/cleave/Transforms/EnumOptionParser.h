//===- EnumOptionParser.h - enum options that list their values -*- C++ -*-===//
//
// llvm::cl's parser of enum-valued options (clEnumValN), specialized for
// Cleave's enums so that a bad value names the spellings it accepts:
//
//   for the --loss option: unknown value 'l1' (available: cross-entropy, mse)
//
// instead of "Cannot find option named 'l1'!". It serves pass options,
// pipeline options and tool flags alike, since they all parse through
// llvm::cl::parser<Enum>.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_TRANSFORMS_ENUMOPTIONPARSER_H
#define CLEAVE_TRANSFORMS_ENUMOPTIONPARSER_H

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/CommandLine.h"

#include <cassert>

namespace cleave {

/// llvm::cl::parser<T>'s mapping of spellings to values, with the error
/// above. mlir::detail::PassOptions reads `Values` to print an option.
template <typename T>
class EnumOptionParser : public llvm::cl::generic_parser_base {
protected:
  class OptionInfo : public GenericOptionInfo {
  public:
    OptionInfo(llvm::StringRef name, T v, llvm::StringRef helpStr)
        : GenericOptionInfo(name, helpStr), V(v) {}
    llvm::cl::OptionValue<T> V;
  };
  llvm::SmallVector<OptionInfo, 8> Values;

public:
  using parser_data_type = T;

  explicit EnumOptionParser(llvm::cl::Option &owner)
      : generic_parser_base(owner) {}

  unsigned getNumOptions() const override { return unsigned(Values.size()); }
  llvm::StringRef getOption(unsigned n) const override {
    return Values[n].Name;
  }
  llvm::StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &
  getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  /// Returns true on error, as llvm::cl's parsers do.
  bool parse(llvm::cl::Option &option, llvm::StringRef argName,
             llvm::StringRef arg, T &value) {
    llvm::StringRef spelling = Owner.hasArgStr() ? arg : argName;
    for (const OptionInfo &info : Values)
      if (info.Name == spelling) {
        value = info.V.getValue();
        return false;
      }
    llvm::SmallString<64> available;
    for (const OptionInfo &info : Values) {
      if (!available.empty())
        available += ", ";
      available += info.Name;
    }
    return option.error("unknown value '" + spelling +
                        "' (available: " + available + ")");
  }

  template <typename V>
  void addLiteralOption(llvm::StringRef name, const V &value,
                        llvm::StringRef helpStr) {
    Values.push_back(OptionInfo(name, static_cast<T>(value), helpStr));
    llvm::cl::AddLiteralOption(Owner, name);
  }

  void removeLiteralOption(llvm::StringRef name) {
    unsigned n = findOption(name);
    assert(n != Values.size() && "no such value");
    Values.erase(Values.begin() + n);
  }
};

} // namespace cleave

/// Makes `ENUM`'s options parse with cleave::EnumOptionParser; at global
/// scope, before the first option of the enum.
#define CLEAVE_ENUM_OPTION_PARSER(ENUM)                                        \
  template <>                                                                  \
  class llvm::cl::parser<ENUM> : public ::cleave::EnumOptionParser<ENUM> {     \
  public:                                                                      \
    explicit parser(llvm::cl::Option &owner)                                   \
        : ::cleave::EnumOptionParser<ENUM>(owner) {}                           \
  };

#endif // CLEAVE_TRANSFORMS_ENUMOPTIONPARSER_H
