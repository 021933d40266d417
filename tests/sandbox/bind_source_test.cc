// OpenBindSource against a real directory tree: the host's own symlinks are
// followed, nothing inside a read-write mount's tree is looked up, whatever
// a cell could have planted there (relative or absolute symlinks, renames,
// a directory swapped for a file or a hard link).
#include "sandbox/bind_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace dolsot {
namespace {

class BindSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/dolsot-bind-source-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
    root_.Reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string P(const std::string& rel) const { return dir_ + "/" + rel; }
  void Dir(const std::string& rel) const { ASSERT_EQ(::mkdir(P(rel).c_str(), 0755), 0) << rel; }
  void File(const std::string& rel) const {
    UniqueFd fd(::open(P(rel).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd) << rel;
  }
  void Link(const std::string& target, const std::string& rel) const {
    ASSERT_EQ(::symlink(target.c_str(), P(rel).c_str()), 0) << rel;
  }
  FileIdentity Id(const std::string& path) const {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return {st.st_dev, st.st_ino};
  }
  // The read-write mounts' sources as trees.
  WritableTrees Trees(std::initializer_list<std::string> rels) const {
    WritableTrees trees;
    for (const std::string& rel : rels) {
      trees.roots.push_back(Id(P(rel)));
      trees.names.push_back(P(rel));
    }
    return trees;
  }
  // What `path` opens as (an identity), or the error's code.
  StatusOr<FileIdentity> Open(const std::string& path, const WritableTrees& trees,
                              bool follow = true) const {
    auto fd = OpenBindSource(root_.get(), path, trees, follow);
    if (!fd.ok()) return fd.status();
    return IdentityOf(fd->get());
  }

  std::string dir_;
  UniqueFd root_;
};

TEST_F(BindSourceTest, OpensPlainPathsAndFollowsTheHostsOwnSymlinks) {
  Dir("a");
  Dir("a/b");
  File("a/b/f");
  Link("a/b", "rel");          // relative
  Link(P("a"), "abs");         // absolute
  Link("../a/./b/", "a/up");   // with '..' and '.'
  auto plain = Open(P("a/b/f"), {});
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, Id(P("a/b/f")));
  for (const char* via : {"rel/f", "abs/b/f", "a/up/f"}) {
    auto opened = Open(P(via), {});
    ASSERT_TRUE(opened.ok()) << via << ": " << opened.status().message();
    EXPECT_EQ(*opened, Id(P("a/b/f"))) << via;
  }
}

TEST_F(BindSourceTest, AWritableTreeItselfOpensButNothingInsideItIsLookedUp) {
  Dir("rw");
  Dir("rw/inner");
  auto trees = Trees({"rw"});
  auto root = Open(P("rw"), trees);
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_EQ(*root, Id(P("rw")));
  // Even an honest directory inside is refused: a cell could swap it.
  auto inner = Open(P("rw/inner"), trees);
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().code(), ErrorCode::kPermission);
  EXPECT_NE(inner.status().message().find(P("rw")), std::string::npos) << inner.status().message();
}

TEST_F(BindSourceTest, APlantedRelativeSymlinkNeverLeadsOut) {
  // The red team's escape: rw/inner replaced by '../../..'-style links.
  Dir("rw");
  auto trees = Trees({"rw"});
  std::string up = "..";
  for (int depth = 0; depth < 12; ++depth, up += "/..") {
    std::string name = "rw/inner" + std::to_string(depth);
    Link(up, name);
    auto opened = Open(P(name), trees);
    ASSERT_FALSE(opened.ok()) << name;
    EXPECT_EQ(opened.status().code(), ErrorCode::kPermission);
    auto deeper = Open(P(name) + "/etc", trees);
    ASSERT_FALSE(deeper.ok()) << name;
  }
  Link("/", "rw/absolute");
  EXPECT_FALSE(Open(P("rw/absolute"), trees).ok());
}

TEST_F(BindSourceTest, AHostSymlinkIntoAWritableTreeIsRefusedToo) {
  // The host's own link leads into the read-write tree and on: what is
  // found past it is the cell's to choose.
  Dir("rw");
  Dir("rw/sub");
  Link(P("rw"), "alias");
  auto trees = Trees({"rw"});
  auto opened = Open(P("alias/sub"), trees);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kPermission);
  // The alias to the tree itself is the tree.
  auto itself = Open(P("alias"), trees);
  ASSERT_TRUE(itself.ok()) << itself.status().message();
  EXPECT_EQ(*itself, Id(P("rw")));
}

TEST_F(BindSourceTest, DotDotGoesBackUpTheWalkNotThroughAWritableTree) {
  Dir("rw");
  Dir("ro");
  File("ro/f");
  // A host link whose '..' passes the writable tree's root but looks
  // nothing up inside it.
  Link("rw/../ro", "via");
  auto opened = Open(P("via/f"), Trees({"rw"}));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(*opened, Id(P("ro/f")));
}

TEST_F(BindSourceTest, NoSymlinksWhenAsked) {
  Dir("a");
  Link("a", "l");
  auto opened = Open(P("l"), {}, /*follow=*/false);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kPermission);
  EXPECT_TRUE(Open(P("a"), {}, /*follow=*/false).ok());
}

TEST_F(BindSourceTest, LoopsMissingPathsAndFilesInTheWayAreErrors) {
  Link("loop", "loop");
  EXPECT_FALSE(Open(P("loop"), {}).ok());
  EXPECT_EQ(Open(P("missing"), {}).status().code(), ErrorCode::kInvalidArgument);
  File("file");
  EXPECT_EQ(Open(P("file/below"), {}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Open("relative/path", {}).status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(BindSourceTest, CheckMountSourcesNamesTheFirstMissingOne) {
  Dir("here");
  File("file");
  Link("here", "link");
  EXPECT_TRUE(CheckMountSources({}).ok());
  EXPECT_TRUE(CheckMountSources({{"/a", P("here")}, {"/b", P("file")},
                                 {"/c", P("link"), MountMode::kReadWrite}}).ok());
  for (const std::string& missing : {P("missing"), P("here/missing/below"), P("file/below")}) {
    Status status = CheckMountSources({{"/a", P("here")}, {"/x", missing, MountMode::kOverlay}});
    EXPECT_EQ(status.code(), ErrorCode::kConfig) << missing;
    EXPECT_EQ(status.message(), "mount /x: the host path '" + missing + "' does not exist");
  }
  Link("gone", "dangling");  // leads nowhere: missing too
  EXPECT_EQ(CheckMountSources({{"/d", P("dangling")}}).code(), ErrorCode::kConfig);
}

TEST_F(BindSourceTest, TheDescriptorStaysOnWhatWasCheckedAfterARename) {
  // A rename after the check changes nothing: the descriptor is bound.
  Dir("src");
  File("src/marker");
  auto fd = OpenBindSource(root_.get(), P("src"), {});
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(::rename(P("src").c_str(), P("moved").c_str()), 0);
  Dir("src");  // a new directory under the old name
  auto id = IdentityOf(fd->get());
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, Id(P("moved")));
  EXPECT_NE(*id, Id(P("src")));
  EXPECT_EQ(DescriptorPath("/proc", 7), "/proc/self/fd/7");
}

}  // namespace
}  // namespace dolsot
