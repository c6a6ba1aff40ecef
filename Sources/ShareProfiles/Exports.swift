// The profile model lives in ShareProfileModel (small enough for the watch); the archive of profiles lives here.
@_exported import ShareProfileModel
