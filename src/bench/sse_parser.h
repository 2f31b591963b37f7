// Incremental parser of a text/event-stream body (Server-Sent Events): bytes
// go in as they arrive, complete events' data come out. Lines end in \n,
// \r\n or \r; "data:" lines (one optional space after the colon) of one
// event are joined with \n; a blank line ends the event; comment lines
// (":...") and other fields (event, id, retry) are ignored.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::bench {

class SseParser {
 public:
  // Appends `bytes` and returns the data of every event they complete, in order.
  std::vector<std::string> feed(std::string_view bytes);
  // End of stream: returns the data of an event that was not closed by a
  // blank line (servers that omit the final one), if any.
  std::vector<std::string> finish();

 private:
  void take_line(std::string_view line, std::vector<std::string>& out);

  std::string pending_;  // bytes after the last complete line
  std::string data_;     // data lines of the event being read
  bool has_data_ = false;
  bool last_was_cr_ = false;  // the previous feed ended in \r: a following \n belongs to it
};

}  // namespace pagoda::bench
