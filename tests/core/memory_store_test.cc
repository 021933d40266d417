// MemoryStore: the SessionStore protocol in memory.
#include "core/memory_store.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

TEST(MemoryStoreTest, SaveLoadListDelete) {
  MemoryStore store;
  auto missing = store.Load("s1");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  ASSERT_TRUE(store.Save("s1", std::string("a\0b", 3)).ok());
  ASSERT_TRUE(store.Save("s2", "xyz").ok());
  auto loaded = store.Load("s1");
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(**loaded, std::string("a\0b", 3));

  auto listed = store.List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].id, "s1");
  EXPECT_EQ((*listed)[0].size_bytes, 3u);
  EXPECT_GT((*listed)[0].last_used, 0);

  EXPECT_EQ(*store.Delete("s1"), 1);
  EXPECT_EQ(*store.Delete("s1"), 0);
  EXPECT_EQ(*store.Delete("all"), 1);
  EXPECT_TRUE(store.List()->empty());
}

TEST(MemoryStoreTest, AppendsToAnExistingBlobOnly) {
  MemoryStore store;
  EXPECT_EQ(store.Append("s", "x").code(), ErrorCode::kInvalidSession);
  EXPECT_FALSE(store.Load("s")->has_value());  // an append makes no session
  ASSERT_TRUE(store.Save("s", "base").ok());
  ASSERT_TRUE(store.Append("s", std::string("+1\0", 3)).ok());
  ASSERT_TRUE(store.Append("s", "+2").ok());
  EXPECT_EQ(**store.Load("s"), std::string("base+1\0+2", 9));
  EXPECT_EQ((*store.List())[0].size_bytes, 9u);
  ASSERT_TRUE(store.Save("s", "new").ok());  // a save replaces blob and appends
  EXPECT_EQ(**store.Load("s"), "new");
  EXPECT_EQ(store.Append("../x", "b").code(), ErrorCode::kInvalidSession);
}

TEST(MemoryStoreTest, RefusesBadIds) {
  MemoryStore store;
  EXPECT_EQ(store.Save("../x", "b").code(), ErrorCode::kInvalidSession);
  EXPECT_FALSE(store.Load("").ok());
  EXPECT_FALSE(store.Delete("a/b").ok());
}

}  // namespace
}  // namespace dolsot
