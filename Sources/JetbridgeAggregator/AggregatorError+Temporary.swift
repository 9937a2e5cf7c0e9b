import JetbridgeStore
import SystemSupport

extension AggregatorError {
    /// The operator's error for a full disk or a busy store (``FailureClass``): `.tryAgain` (exit 75), saying what
    /// to do; nil for any other failure, which the caller maps by what it was doing.
    /// - Parameters:
    ///   - error: What failed.
    ///   - context: What was attempted, such as `cannot write /ground/devices.json`.
    init?(temporary error: any Error, context: String) {
        switch FailureClass(error) {
        case .noSpace:
            self.init(.tryAgain, "\(context): no space left on device; free some space and try again: \(error)")
        case .busy: self.init(.tryAgain, "\(context): the store is busy; try again: \(error)")
        case .other: return nil
        }
    }
}
