// Finding a file of an installed Python package by name, version and path
// (bench W7's source text): found at the right version, refused with the
// installed version named otherwise, and a clear error when absent.
#include "bench/package_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pagoda::bench {
namespace {

namespace fs = std::filesystem;

class PackageSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("pagoda_pkg_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A site-packages folder holding Foo-Bar `version` (dist-info spelled as
  // pip writes it) with foo_bar/mod.py.
  std::string site(const std::string& name, const std::string& version, bool with_file = true) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir / ("Foo_Bar-" + version + ".dist-info"));
    std::ofstream(dir / ("Foo_Bar-" + version + ".dist-info") / "METADATA")
        << "Metadata-Version: 2.1\nName: Foo-Bar\nVersion: " << version
        << "\nSummary: x\n\nVersion: 9.9 (the body, not a header)\n";
    if (with_file) {
      fs::create_directories(dir / "foo_bar");
      std::ofstream(dir / "foo_bar" / "mod.py") << "def f():\n    return " << version << "\n";
    }
    return dir.string();
  }

  fs::path root_;
};

TEST_F(PackageSourceTest, ReadsTheFileOfTheWantedVersion) {
  const std::string old_site = site("old", "1.0");
  const std::string new_site = site("new", "2.0");
  auto text = read_package_file({"foo-bar", "2.0", "foo_bar/mod.py"}, {old_site, new_site});
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "def f():\n    return 2.0\n");
}

TEST_F(PackageSourceTest, RefusesAnotherVersionNamingIt) {
  const std::string dir = site("s", "1.0");
  auto text = read_package_file({"foo-bar", "2.0", "foo_bar/mod.py"}, {dir});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().code, ErrorCode::kNotFound);
  const std::string& m = text.error().message;
  EXPECT_NE(m.find("foo-bar 2.0's foo_bar/mod.py"), std::string::npos) << m;
  EXPECT_NE(m.find("1.0 in " + dir), std::string::npos) << m;
  EXPECT_NE(m.find("pip install foo-bar==2.0"), std::string::npos) << m;
}

TEST_F(PackageSourceTest, NamesWhatIsMissing) {
  auto none = read_package_file({"foo-bar", "2.0", "foo_bar/mod.py"}, {(root_ / "empty").string()});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no folder holds foo-bar"), std::string::npos)
      << none.error().message;
  const std::string dir = site("nofile", "2.0", /*with_file=*/false);
  auto missing = read_package_file({"foo-bar", "2.0", "foo_bar/mod.py"}, {dir});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot be read"), std::string::npos)
      << missing.error().message;
}

TEST(PythonPathDirs, FailsClearlyWithoutTheInterpreter) {
  auto dirs = python_path_dirs("/nonexistent/python3");
  ASSERT_FALSE(dirs.ok());
  EXPECT_NE(dirs.error().message.find("/nonexistent/python3"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::bench
